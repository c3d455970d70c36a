// AdaGrad (Duchi, Hazan, Singer 2011), the optimizer of the paper's sentiment model:
//   G ← G + g²,   θ ← θ − η g / (sqrt(G) + ε)
// elementwise, G starting at `initial_accumulator`.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "pens/ops/ir/error.h"
#include "pens/ops/ir/memory.h"
#include "pens/ops/parallel.h"
#include "pens/train/optim/optimizer.h"

namespace pens {

namespace {

// sum += g², θ -= η g / (sqrt(sum) + ε) over n elements. Written as a plain loop, std::sqrt
// (which may set errno) kept the compiler from vectorizing it, and the update took a
// fifth of a subspace model's step. The AVX-512 path computes what the loop computes:
// the sum as one fused multiply-add (as the compiler contracts the loop's), then an
// exact square root and division.
void adagrad_update(float* theta, const float* g, float* sum, int64_t n, float eta, float epsilon) {
  int64_t i = 0;
#if defined(__AVX512F__) && defined(__FMA__)
  const __m512 rate = _mm512_set1_ps(eta), eps = _mm512_set1_ps(epsilon);
  for (; i + 16 <= n; i += 16) {
    const __m512 gi = _mm512_loadu_ps(g + i);
    const __m512 s = _mm512_fmadd_ps(gi, gi, _mm512_loadu_ps(sum + i));
    _mm512_storeu_ps(sum + i, s);
    const __m512 step = _mm512_div_ps(_mm512_mul_ps(rate, gi), _mm512_add_ps(_mm512_sqrt_ps(s), eps));
    _mm512_storeu_ps(theta + i, _mm512_sub_ps(_mm512_loadu_ps(theta + i), step));
  }
#endif
  for (; i < n; ++i) {
    sum[i] += g[i] * g[i];
    theta[i] -= eta * g[i] / (std::sqrt(sum[i]) + epsilon);
  }
}

class AdaGrad : public Optimizer {
 public:
  AdaGrad(ParamStore<float>& params, const Attributes& settings)
      : params_(params),
        epsilon_(static_cast<float>(settings.get_float("epsilon"))),
        initial_(static_cast<float>(settings.get_float("initial_accumulator"))),
        memory_(params.values().size() * sizeof(float), "adagrad's sums of squares"),
        squares_(params.values().size(), initial_) {
    if (!(settings.get_float("epsilon") >= 0 && initial_ >= 0)) {
      fail("optimizer adagrad: epsilon and initial_accumulator must be >= 0, got ", settings.get_float("epsilon"),
           " and ", settings.get_float("initial_accumulator"));
    }
    if (epsilon_ == 0 && initial_ == 0) {
      fail("optimizer adagrad: epsilon and initial_accumulator are both 0: a parameter whose gradients are all 0 "
           "would be updated by 0/0");
    }
  }

  std::string_view kind() const override { return "adagrad"; }

  void step(const OptimizerStep& s) override {
    parallel_ranges(static_cast<int64_t>(squares_.size()), [&](int64_t begin, int64_t n) { step_range(s, begin, n); });
  }

  // adagrad_update computes each element alike in its vector and scalar loops.
  bool elementwise() const override { return true; }
  void step_range(const OptimizerStep& s, int64_t begin, int64_t n) override {
    adagrad_update(params_.values().data() + begin, params_.grads().data() + begin, squares_.data() + begin, n,
                   static_cast<float>(s.learning_rate), epsilon_);
  }

  std::vector<StateBuffer> state() override { return {{"sum_squares", squares_}}; }
  void restart() override { std::ranges::fill(squares_, initial_); }

 private:
  ParamStore<float>& params_;
  float epsilon_;
  float initial_;
  MemoryCharge memory_;  // squares_ against pens' memory limit, before it is allocated
  std::vector<float, Eigen::aligned_allocator<float>> squares_;
};

}  // namespace

OptimizerKind adagrad_optimizer() {
  return {"adagrad",
          "G <- G + g^2, theta <- theta - eta g / (sqrt(G) + epsilon)",
          {{"epsilon", AttrType::Float, false, AttrValue(1e-8), "added to sqrt(G): keeps the first steps finite"},
           {"initial_accumulator", AttrType::Float, false, AttrValue(0.0), "G's initial value"}},
          [](ParamStore<float>& params, const Attributes& settings) {
            return std::make_unique<AdaGrad>(params, settings);
          }};
}

}  // namespace pens
