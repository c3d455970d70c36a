// Adversarial noise, as in virtual adversarial training (Miyato et al., "Virtual
// adversarial training", TPAMI 2018): the child sees x + r_adv, where r_adv is the
// direction of radius eps (per example) in which the divergence between the clean
// parent's prediction and the child's grows fastest. That direction is the dominant
// eigenvector of the divergence's Hessian at r = 0, found by power iteration: from a
// random d, d <- grad_r D(r) at r = xi d / |d|, a finite-difference product of the
// Hessian with d. The gradients come from the probe's body (graph/pseudo_ensemble.h);
// r_adv is then a constant of the outer objective, as in the paper.
#include <cmath>
#include <vector>

#include "pens/graph/noise.h"
#include "pens/ops/ir/error.h"

namespace pens {

namespace {

// Scales each row of v (rows x width) to length `length`; a row of zeros stays zero.
void set_row_lengths(std::span<double> v, int64_t rows, int64_t width, double length) {
  for (int64_t i = 0; i < rows; ++i) {
    std::span<double> row = v.subspan(static_cast<size_t>(i * width), static_cast<size_t>(width));
    double squares = 0;
    for (double x : row) squares += x * x;
    if (squares == 0) continue;
    const double factor = length / std::sqrt(squares);
    for (double& x : row) x *= factor;
  }
}

}  // namespace

NoiseKind adversarial_kind() {
  return {"adversarial",
          "virtual adversarial noise: x + r_adv, |r_adv| = eps per example, in the direction the divergence "
          "from the clean parent grows fastest (power iteration); constant in the outer gradient",
          {{"eps", AttrType::Float, false, AttrValue(2.0), "length of r_adv per example", AttrRange::at_least(0)},
           {"xi", AttrType::Float, false, AttrValue(1e-6), "finite-difference step of the power iteration",
            AttrRange::above(0)},
           {"iterations", AttrType::Int, false, AttrValue(int64_t{1}), "power iterations", AttrRange::from_to(1, 100)},
           {"divergence", AttrType::String, false, AttrValue(std::string("kl")),
            "penalty kind measured between the parent's output and the child's"},
           {"precision", AttrType::String, false, AttrValue(std::string("float32")),
            "the power iteration's arithmetic: float32, or float64 (the probe's network in double, so that a step "
            "xi as small as 1e-6 is not rounded away)"}},
          false,
          [](NoiseSite& site, const Attributes& a) {
            const std::string& precision = a.get_string("precision");
            if (precision != "float32" && precision != "float64") {
              fail("adversarial noise: precision must be 'float32' or 'float64', got '", precision, "'");
            }
            const NodeId r = site.add_probe("r_adv", a);
            return site.add("add", {site.value, r}, {}, "adversarial");
          },
          // d, from a random start, becomes the gradient at xi d / |d| in place. In float64
          // the gradient at r = 0 is subtracted: (grad D(xi d) - grad D(0)) / xi is the
          // Hessian's product with d, and grad D(0), zero in exact arithmetic, holds the
          // rounding by which the parent's and the child's outputs at r = 0 differ, which a
          // step of 1e-6 along a small Hessian does not dwarf (1e-4 of the product in
          // tests/autodiff/test_probe.cpp).
          [](PerturbationProbe& probe, const Attributes& a, std::span<double> d) {
            const int64_t rows = probe.rows(), width = probe.width();
            std::span<double> at_zero;  // empty in float32
            if (a.get_string("precision") == "float64") {
              const std::span<double> zero = probe.scratch(0);
              std::fill(zero.begin(), zero.end(), 0.0);
              at_zero = probe.scratch(1);
              probe.gradient(zero, at_zero);
            }
            probe.normal(d);
            for (int64_t i = 0; i < a.get_int("iterations"); ++i) {
              set_row_lengths(d, rows, width, a.get_float("xi"));
              probe.gradient(d, d);
              for (size_t j = 0; j < at_zero.size(); ++j) d[j] -= at_zero[j];
            }
            set_row_lengths(d, rows, width, a.get_float("eps"));
          }};
}

}  // namespace pens
