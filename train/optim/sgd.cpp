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

  // In ranges on the kernels' threads (parallel_ranges): each element's arithmetic is the
  // same whichever thread takes its range.
  void step(const OptimizerStep& s) override {
    const auto mu = static_cast<float>(s.momentum);
    const auto eta = static_cast<float>(s.learning_rate);
    float* theta = params_.values().data();
    const float* g = params_.grads().data();
    float* m = velocity_.data();
    parallel_ranges(static_cast<int64_t>(velocity_.size()), [&](int64_t begin, int64_t n) {
      for (int64_t i = begin; i < begin + n; ++i) {
        m[i] = mu * m[i] + (1.0f - mu) * g[i];
        theta[i] -= eta * m[i];
      }
    });
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
