// SGD with momentum, in the form of the authors' code:
//   m ← μ m + (1 − μ) g,   θ ← θ − η m
// (the (1 − μ) factor keeps the step's scale independent of μ as μ ramps up).
#include <Eigen/Core>

#include "pens/ops/ir/memory.h"
#include "pens/ops/parallel.h"
#include "pens/train/optim/optimizer.h"

namespace pens {

namespace {

class Sgd : public Optimizer {
 public:
  explicit Sgd(ParamStore<float>& params)
      : params_(params),
        memory_(params.values().size() * sizeof(float), "sgd's velocity"),
        velocity_(params.values().size(), 0.0f) {}

  std::string_view kind() const override { return "sgd"; }

  // In ranges on the kernels' threads (parallel_ranges).
  void step(const OptimizerStep& s) override {
    parallel_ranges(static_cast<int64_t>(velocity_.size()), [&](int64_t begin, int64_t n) { step_range(s, begin, n); });
  }

  // A plain loop: the compiler contracts it into the same fused multiply-adds in its
  // vector body and in its scalar remainder, so an element's bits do not depend on where
  // a range starts or ends.
  bool elementwise() const override { return true; }
  void step_range(const OptimizerStep& s, int64_t begin, int64_t n) override {
    const auto mu = static_cast<float>(s.momentum);
    const auto eta = static_cast<float>(s.learning_rate);
    float* theta = params_.values().data() + begin;
    const float* g = params_.grads().data() + begin;
    float* m = velocity_.data() + begin;
    for (int64_t i = 0; i < n; ++i) {
      m[i] = mu * m[i] + (1.0f - mu) * g[i];
      theta[i] -= eta * m[i];
    }
  }

  std::vector<StateBuffer> state() override { return {{"velocity", velocity_}}; }

 private:
  ParamStore<float>& params_;
  MemoryCharge memory_;  // velocity_ against pens' memory limit, before it is allocated
  std::vector<float, Eigen::aligned_allocator<float>> velocity_;
};

}  // namespace

OptimizerKind sgd_optimizer() {
  return {"sgd", "m <- mu m + (1 - mu) g, theta <- theta - eta m (the authors' momentum form)", {},
          [](ParamStore<float>& params, const Attributes&) { return std::make_unique<Sgd>(params); }};
}

}  // namespace pens
