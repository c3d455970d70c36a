// A noise kind defined outside pens: multiplicative Gaussian noise, x * (1 + sigma eps)
// with one eps per element. Register it once at start-up:
//   pens::NoiseRegistry::register_global(multiplicative_noise());
#pragma once

#include "pens/graph/noise.h"

inline pens::NoiseKind multiplicative_noise() {
  return {"multiplicative",
          "x * (1 + sigma * eps), one standard normal eps per element",
          {{"sigma", pens::AttrType::Float, false, pens::AttrValue(0.2), "standard deviation of the factor"}},
          /*parameters_only=*/false,
          [](pens::NoiseSite& site, const pens::Attributes& a) {
            // Zeros shaped like the value, then sigma * eps on each: the draw has the
            // value's shape whatever it is (batch rows included) and no gradient path.
            const pens::NodeId zeros = site.add("scale", {site.value}, {{"factor", 0.0}}, "zeros");
            const pens::NodeId eps = site.add("gaussian_noise", {zeros},
                                              {{"sigma", a.get_float("sigma")}, {"stream", site.stream()}}, "eps");
            const pens::NodeId scaled = site.add("mul", {site.value, eps}, {}, "scaled");
            return site.add("add", {site.value, scaled}, {}, "multiplicative");
          }};
}
