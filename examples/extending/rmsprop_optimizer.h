// An optimizer defined outside pens: RMSprop (Tieleman & Hinton 2012),
//   s <- rho s + (1 - rho) g^2,  theta <- theta - eta g / (sqrt(s) + epsilon).
// Register it once at start-up:
//   pens::OptimizerRegistry::register_global(rmsprop_optimizer());
#pragma once

#include <cmath>
#include <memory>
#include <vector>

#include "pens/ops/ir/memory.h"
#include "pens/train/optim/optimizer.h"

class RmsProp : public pens::Optimizer {
 public:
  RmsProp(pens::ParamStore<float>& params, const pens::Attributes& settings)
      : params_(params),
        rho_(static_cast<float>(settings.get_float("rho"))),
        epsilon_(static_cast<float>(settings.get_float("epsilon"))),
        // Charged against pens' memory limit before the buffer is allocated.
        memory_(params.values().size() * sizeof(float), "rmsprop's mean squares"),
        mean_square_(params.values().size(), 0.0f) {}

  std::string_view kind() const override { return "rmsprop"; }

  void step(const pens::OptimizerStep& s) override {
    const auto eta = static_cast<float>(s.learning_rate);
    float* theta = params_.values().data();
    const float* g = params_.grads().data();
    for (size_t i = 0; i < mean_square_.size(); ++i) {
      mean_square_[i] = rho_ * mean_square_[i] + (1.0f - rho_) * g[i] * g[i];
      theta[i] -= eta * g[i] / (std::sqrt(mean_square_[i]) + epsilon_);
    }
  }

  // Checkpoints save and restore this by name.
  std::vector<pens::StateBuffer> state() override { return {{"mean_square", mean_square_}}; }

 private:
  pens::ParamStore<float>& params_;
  float rho_, epsilon_;
  pens::MemoryCharge memory_;
  std::vector<float> mean_square_;
};

inline pens::OptimizerKind rmsprop_optimizer() {
  return {"rmsprop",
          "RMSprop: g scaled by a moving root mean square",
          {{"rho", pens::AttrType::Float, false, pens::AttrValue(0.9), "decay of the mean of g^2",
            pens::AttrRange::from_below(0, 1)},
           {"epsilon", pens::AttrType::Float, false, pens::AttrValue(1e-8), "added to the root (> 0)",
            pens::AttrRange::above(0)}},
          [](pens::ParamStore<float>& params, const pens::Attributes& settings) {
            return std::make_unique<RmsProp>(params, settings);
          }};
}
