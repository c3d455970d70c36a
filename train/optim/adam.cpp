// Adam (Kingma & Ba 2015), the optimizer of the consistency methods that followed PEA
// (mean teacher, VAT):
//   m ← β1 m + (1 − β1) g,   v ← β2 v + (1 − β2) g²,
//   θ ← θ − η (m / (1 − β1^t)) / (sqrt(v / (1 − β2^t)) + ε),   t = step + 1
// elementwise. The bias corrections come from the step number, so a resumed run needs
// no counter in its state; the momentum of the schedule is not used.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "pens/ops/ir/error.h"
#include "pens/ops/ir/memory.h"
#include "pens/ops/parallel.h"
#include "pens/train/optim/optimizer.h"

namespace pens {

namespace {

class Adam : public Optimizer {
  // The bias corrections an update divides by: those that have not reached 1.
  enum class Corrections { both, square_only, none };

 public:
  Adam(ParamStore<float>& params, const Attributes& settings)
      : params_(params),
        beta1_(settings.get_float("beta1")),
        beta2_(settings.get_float("beta2")),
        epsilon_(static_cast<float>(settings.get_float("epsilon"))),
        memory_(2 * params.values().size() * sizeof(float), "adam's moment estimates"),
        mean_(params.values().size(), 0.0f),
        square_(params.values().size(), 0.0f) {}

  std::string_view kind() const override { return "adam"; }

  void step(const OptimizerStep& s) override {
    const double t = static_cast<double>(s.step + 1);
    const auto correct1 = static_cast<float>(1.0 - std::pow(beta1_, t));
    const auto correct2 = static_cast<float>(1.0 - std::pow(beta2_, t));
    const auto b1 = static_cast<float>(beta1_), b2 = static_cast<float>(beta2_);
    const auto eta = static_cast<float>(s.learning_rate);
    float* theta = params_.values().data();
    const float* g = params_.grads().data();
    float* m = mean_.data();
    float* v = square_.data();
    // In ranges on the kernels' threads (parallel_ranges: a range's elements are the same
    // whichever thread takes it, so results do not depend on the thread count); Eigen's
    // arrays vectorise the square root, which a scalar std::sqrt loop does not (errno).
    // A bias correction that has reached 1 in float (from t = 165 for β1 = 0.9, t = 17,321
    // for β2 = 0.999) divides by 1, which changes no bit: skipping those divisions takes
    // two of the three per element.
    const auto update = [&](auto divisions) {
      parallel_ranges(static_cast<int64_t>(mean_.size()), [&](int64_t begin, int64_t size) {
        Eigen::Map<Eigen::ArrayXf> mc(m + begin, size), vc(v + begin, size), tc(theta + begin, size);
        const Eigen::Map<const Eigen::ArrayXf> gc(g + begin, size);
        mc = b1 * mc + (1.0f - b1) * gc;
        vc = b2 * vc + (1.0f - b2) * gc * gc;
        if constexpr (divisions == Corrections::both) {
          tc -= eta * (mc / correct1) / ((vc / correct2).sqrt() + epsilon_);
        } else if constexpr (divisions == Corrections::square_only) {
          tc -= eta * mc / ((vc / correct2).sqrt() + epsilon_);
        } else {
          tc -= eta * mc / (vc.sqrt() + epsilon_);
        }
      });
    };
    if (correct1 != 1.0f) {
      update(std::integral_constant<Corrections, Corrections::both>());
    } else if (correct2 != 1.0f) {
      update(std::integral_constant<Corrections, Corrections::square_only>());
    } else {
      update(std::integral_constant<Corrections, Corrections::none>());
    }
  }

  std::vector<StateBuffer> state() override { return {{"mean", mean_}, {"mean_square", square_}}; }

 private:
  ParamStore<float>& params_;
  double beta1_, beta2_;
  float epsilon_;
  MemoryCharge memory_;  // the two buffers against pens' memory limit, before they are allocated
  std::vector<float, Eigen::aligned_allocator<float>> mean_, square_;
};

}  // namespace

OptimizerKind adam_optimizer() {
  return {"adam",
          "m <- b1 m + (1 - b1) g, v <- b2 v + (1 - b2) g^2, theta <- theta - eta m^ / (sqrt(v^) + epsilon), "
          "bias-corrected",
          {{"beta1", AttrType::Float, false, AttrValue(0.9), "decay of the mean of g", AttrRange::from_below(0, 1)},
           {"beta2", AttrType::Float, false, AttrValue(0.999), "decay of the mean of g^2", AttrRange::from_below(0, 1)},
           {"epsilon", AttrType::Float, false, AttrValue(1e-8), "added to the root of v^ (> 0: a parameter whose gradients are all 0 stays put)", AttrRange::above(0)}},
          [](ParamStore<float>& params, const Attributes& settings) {
            return std::make_unique<Adam>(params, settings);
          }};
}

}  // namespace pens
