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
  virtual void apply(ParamStore<float>& params, const OptimizerStep& at) = 0;
  // Adds to `out` the parameters that the update `at` must leave as they are: their
  // gradients are zero after apply(), and the constraints skip them.
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
  void apply(ParamStore<float>& params, const OptimizerStep& at) override;
  void held(const OptimizerStep& at, std::vector<const ParamEntry*>& out) const override;

 private:
  bool active(const OptimizerStep& at) const { return at.epoch >= from_ && at.epoch < until_; }
  std::vector<const ParamEntry*> parameters_;
  double from_, until_;
};

using GradientTransforms = std::vector<std::unique_ptr<GradientTransform>>;

}  // namespace pens
