// SGD with momentum, in the form of the authors' code:
//   m ← μ m + (1 − μ) g,   θ ← θ − η m
// (the (1 − μ) factor keeps the step's scale independent of μ as μ ramps up).
#include <Eigen/Core>
#include <algorithm>

#include "pens/ops/ir/memory.h"
#include "pens/ops/parallel.h"
#include "pens/train/optimizer.h"

namespace pens {

namespace {

class Sgd : public Optimizer {
 public:
  explicit Sgd(ParamStore<float>& params)
      : params_(params),
        memory_(params.values().size() * sizeof(float), "sgd's velocity"),
        velocity_(params.values().size(), 0.0f) {}

  std::string_view kind() const override { return "sgd"; }

  // Chunks of the update on the kernels' threads, as Adam's (train/adam.cpp): each
  // element's arithmetic is the same whichever thread takes its chunk.
  static constexpr int64_t kChunk = 1 << 16;

  void step(const OptimizerStep& s) override {
    const auto mu = static_cast<float>(s.momentum);
    const auto eta = static_cast<float>(s.learning_rate);
    float* theta = params_.values().data();
    const float* g = params_.grads().data();
    float* m = velocity_.data();
    const auto n = static_cast<int64_t>(velocity_.size());
    parallel_for((n + kChunk - 1) / kChunk, [&](int64_t chunk) {
      for (int64_t i = chunk * kChunk, end = std::min(n, i + kChunk); i < end; ++i) {
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
