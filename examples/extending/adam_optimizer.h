// An optimizer defined outside pens: Adam (Kingma & Ba 2015),
//   m <- b1 m + (1 - b1) g,  v <- b2 v + (1 - b2) g^2,
//   theta <- theta - eta (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + epsilon),  t = step + 1.
// Register it once at start-up:
//   pens::OptimizerRegistry::register_global(adam_optimizer());
#pragma once

#include <cmath>
#include <memory>
#include <vector>

#include "pens/ops/ir/memory.h"
#include "pens/train/optimizer.h"

class Adam : public pens::Optimizer {
 public:
  Adam(pens::ParamStore<float>& params, const pens::Attributes& settings)
      : params_(params),
        beta1_(settings.get_float("beta1")),
        beta2_(settings.get_float("beta2")),
        epsilon_(settings.get_float("epsilon")),
        // Charged against pens' memory limit before the buffers are allocated.
        memory_(2 * params.values().size() * sizeof(float), "adam's moments"),
        m_(params.values().size(), 0.0f),
        v_(params.values().size(), 0.0f) {}

  std::string_view kind() const override { return "adam"; }

  void step(const pens::OptimizerStep& s) override {
    // The step number makes the bias corrections: no counter to keep in the state.
    const double t = static_cast<double>(s.step + 1);
    const auto c1 = static_cast<float>(1.0 - std::pow(beta1_, t));
    const auto c2 = static_cast<float>(1.0 - std::pow(beta2_, t));
    const auto b1 = static_cast<float>(beta1_), b2 = static_cast<float>(beta2_);
    const auto eta = static_cast<float>(s.learning_rate), eps = static_cast<float>(epsilon_);
    float* theta = params_.values().data();
    const float* g = params_.grads().data();
    for (size_t i = 0; i < m_.size(); ++i) {
      m_[i] = b1 * m_[i] + (1.0f - b1) * g[i];
      v_[i] = b2 * v_[i] + (1.0f - b2) * g[i] * g[i];
      theta[i] -= eta * (m_[i] / c1) / (std::sqrt(v_[i] / c2) + eps);
    }
  }

  // Checkpoints save and restore these by name.
  std::vector<pens::StateBuffer> state() override { return {{"m", m_}, {"v", v_}}; }

 private:
  pens::ParamStore<float>& params_;
  double beta1_, beta2_, epsilon_;
  pens::MemoryCharge memory_;
  std::vector<float> m_, v_;
};

inline pens::OptimizerKind adam_optimizer() {
  return {"adam",
          "Adam: bias-corrected moving averages of g and g^2",
          {{"beta1", pens::AttrType::Float, false, pens::AttrValue(0.9), "decay of the mean of g"},
           {"beta2", pens::AttrType::Float, false, pens::AttrValue(0.999), "decay of the mean of g^2"},
           {"epsilon", pens::AttrType::Float, false, pens::AttrValue(1e-8), "added to the root of v"}},
          [](pens::ParamStore<float>& params, const pens::Attributes& settings) {
            return std::make_unique<Adam>(params, settings);
          }};
}
