// A noise kind found from gradients, defined outside pens: the fast-gradient-sign
// perturbation (Goodfellow et al. 2015) of the divergence from the clean parent,
// r = eps * sign(grad_r D(r)) at a small random r, one step instead of VAT's power
// iteration. Register it once at start-up:
//   pens::NoiseRegistry::register_global(sign_adversarial_noise());
#pragma once

#include <cmath>

#include "pens/graph/noise.h"

inline pens::NoiseKind sign_adversarial_noise() {
  return {"sign_adversarial",
          "x + eps * sign(grad D), D the divergence from the clean parent, from a random start of length xi",
          {{"eps", pens::AttrType::Float, false, pens::AttrValue(0.1), "size of each element's step"},
           {"xi", pens::AttrType::Float, false, pens::AttrValue(1e-3), "length of the random start per example"},
           {"divergence", pens::AttrType::String, false, pens::AttrValue(std::string("kl")),
            "penalty kind measured between the parent's output and the child's"}},
          /*parameters_only=*/false,
          // In the graph: a probe node (its value comes from the function below) added
          // to the value.
          [](pens::NoiseSite& site, const pens::Attributes& a) {
            const pens::NodeId r = site.add_probe("r_sign", a);
            return site.add("add", {site.value, r}, {}, "sign_adversarial");
          },
          // While the tape runs: a random start, one gradient, its sign, all in `out`.
          [](pens::PerturbationProbe& probe, const pens::Attributes& a, std::span<double> out) {
            probe.normal(out);
            const auto width = static_cast<size_t>(probe.width());
            for (size_t row = 0; row < out.size(); row += width) {
              double squares = 0;
              for (size_t j = row; j < row + width; ++j) squares += out[j] * out[j];
              for (size_t j = row; j < row + width; ++j) out[j] *= a.get_float("xi") / std::sqrt(squares);
            }
            probe.gradient(out, out);
            for (double& g : out) g = g > 0 ? a.get_float("eps") : g < 0 ? -a.get_float("eps") : 0.0;
          }};
}
