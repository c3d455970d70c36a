// Gradient transforms: what happens to a step's summed gradients before the optimizer
// updates with them. The training step (train/loop/step.h) runs its transforms in order,
// then the optimizer, then the constraints:
//
//   gradients -> transform 1 -> transform 2 -> ... -> optimizer -> constraints
//
// ℓ2 penalties on named parameters (a tree config's "l2") and parameters held still for a
// stretch of epochs (a tree config's word freezing; a classifier stage that trains only
// some parameters, as PEA+'s output-layer-only first epochs) are the built-in transforms;
// a program writes its own by implementing GradientTransform.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "pens/autodiff/param_store.h"
#include "pens/train/optim/optimizer.h"

namespace pens {

class GradientTransform {
 public:
  virtual ~GradientTransform() = default;
  // Changes the summed gradients of `params` before the update `at` (its step and epoch).
  virtual void apply(ParamStore<float>& /*params*/, const OptimizerStep& /*at*/) {}
  // Adds to `out` the parameters that the update `at` must leave as they are: once every
  // transform has run, the step zeroes their gradients, and the constraints skip them
  // (so a hold wins over an ℓ2 in any order).
  virtual void held(const OptimizerStep& /*at*/, std::vector<const ParamEntry*>& /*out*/) const {}
};

// The gradient of Σ_p (λ_p / 2) ||θ_p||²: λ_p θ_p added to each named parameter's gradient,
// in ranges on the kernels' threads. An Error names a parameter the store lacks.
class L2Penalty final : public GradientTransform {
 public:
  L2Penalty(const ParamStore<float>& params, std::map<std::string, double> lambdas);
  void apply(ParamStore<float>& params, const OptimizerStep& at) override;

 private:
  std::map<std::string, double> lambdas_;
};

// Holds `parameters` still in the epochs [from, until): their gradients zeroed and the
// constraints skipping them. Only a fresh or restarted optimizer leaves them entirely in
// place (a momentum or moment estimate would move them on its own).
class HoldParameters final : public GradientTransform {
 public:
  HoldParameters(std::vector<const ParamEntry*> parameters, double from, double until);
  void held(const OptimizerStep& at, std::vector<const ParamEntry*>& out) const override;

 private:
  std::vector<const ParamEntry*> parameters_;
  double from_, until_;
};

using GradientTransforms = std::vector<std::unique_ptr<GradientTransform>>;

// A transform as a config declares it, in its optimizer section:
//   "transforms": [{"kind": "l2", "lambda": 1e-4, "params": ["W1", "W2"]},
//                  {"kind": "hold", "params": ["E"], "until": 10}]
// l2: λ θ added to the named parameters' gradients; hold: the named parameters held still
// in the epochs [from, until) (from 0, until the end when left out).
struct TransformSpec {
  std::string kind;  // l2 | hold
  std::vector<std::string> params;
  double lambda = 0;
  double from = 0, until = 1e300;
};
// The transforms of `specs` over `params`; an Error names a parameter the store lacks, by
// `where` ("optimizer.transforms").
GradientTransforms make_transforms(const std::vector<TransformSpec>& specs, const ParamStore<float>& params,
                                   const std::string& where);

}  // namespace pens
