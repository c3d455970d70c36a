// Batch normalisation (Ioffe & Szegedy 2015) as two ops and a moving average, so that the
// statistics are values of the graph: `batch_variance` gives the variance over the rows
// of a batch around a mean it is handed (the batch's, from `mean` over axis 0), and
// `normalize` standardises with whatever statistics it is handed. In training both come
// from the batch; an inference graph reads the running statistics in their place (a
// moving average of the clean pass's batch statistics, graph/graph.h), and each child of
// a pseudo-ensemble normalises with the statistics of its own perturbed batch or, with
// `batch_statistics: parent`, with the clean parent's.
#include <cmath>

#include "pens/ops/check_case.h"
#include "pens/ops/parallel.h"
#include "pens/ops/registry.h"

namespace pens {

namespace {
// x is [rows, features]; the per-feature inputs are [features].
void expect_features(const InferCtx& ctx, size_t first, size_t count) {
  infer::expect(ctx, 0, 2);
  const int64_t features = ctx.in[0].shape[1];
  for (size_t i = first; i < first + count; ++i) {
    infer::expect(ctx, i, 1);
    if (ctx.in[i].shape[0] != features) {
      ctx.fail(cat("x is ", ctx.in[0].shape.str(), " but input ", i, " is ", ctx.in[i].shape.str(),
                   ": one value per feature"));
    }
  }
}
}  // namespace

// batch_variance: v_j = (1/B) Σ_r (x_rj − m_j)², biased (the batch's own spread, as
// normalisation uses it).  dx_rj = (2/B) dv_j (x_rj − m_j);  dm_j = −(2/B) dv_j Σ_r (x_rj − m_j).
struct BatchVariance {
  static constexpr const char* kName = "batch_variance";
  static constexpr const char* kSummary = "mean over the rows of (x - mean)^2, per feature";
  static std::vector<InputSlot> inputs() { return {{"x"}, {"mean"}}; }
  static ValueInfo infer(const InferCtx& ctx) {
    expect_features(ctx, 1, 1);
    if (ctx.in[0].shape[0] == 0) ctx.fail("x has no rows");
    return ctx.in[1];
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    auto x = args.in[0].mat();
    auto m = args.in[1].mat(1, args.in[1].size());
    auto v = args.out.mat(1, args.out.size());
    parallel_columns(x.rows(), x.cols(), [&](int64_t c, int64_t n) {
      auto vc = v.row(0).segment(c, n);
      const auto mc = m.row(0).segment(c, n);
      vc.setZero();
      for (int64_t r = 0; r < x.rows(); ++r) vc.array() += (x.row(r).segment(c, n) - mc).array().square();
      vc /= static_cast<T>(x.rows());
    });
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    auto x = args.in[0].mat();
    auto m = args.in[1].mat(1, args.in[1].size());
    auto gv = args.gout.mat(1, args.gout.size());
    const T two_over_b = T(2) / static_cast<T>(x.rows());
    parallel_columns(x.rows(), x.cols(), [&](int64_t c, int64_t n) {
      const auto gvc = gv.row(0).segment(c, n).array();
      const auto mc = m.row(0).segment(c, n);
      for (int64_t r = 0; r < x.rows(); ++r) {
        const auto d = (x.row(r).segment(c, n) - mc).array();
        if (args.gin[0]) args.gin[0].mat().row(r).segment(c, n).array() += two_over_b * gvc * d;
        if (args.gin[1]) args.gin[1].mat(1, args.gin[1].size()).row(0).segment(c, n).array() -= two_over_b * gvc * d;
      }
    });
  }
  static void check(CheckBuilder& b) {
    // A mean that is not the batch's, so that its gradient is not zero.
    b.check({b.real({5, 3}, uniform(-2, 2)), b.real({3}, uniform(-1, 1))});
    b.check({b.real({1, 4}, uniform(-2, 2)), b.real({4}, uniform(-1, 1))}, {}, "one row");
  }
};

// normalize: y = (x − m) · s · γ + β per feature, s = 1 / sqrt(v + eps).
//   dx_r = dy_r s γ;  dm = −s γ Σ_r dy_r;  dv = −½ s³ γ Σ_r dy_r (x_r − m);
//   dγ = s Σ_r dy_r (x_r − m);  dβ = Σ_r dy_r.
struct Normalize {
  static constexpr const char* kName = "normalize";
  static constexpr const char* kSummary = "(x - mean) / sqrt(variance + eps) * scale + shift, per feature";
  static constexpr bool kRowWise = true;
  static std::vector<InputSlot> inputs() { return {{"x"}, {"mean"}, {"variance"}, {"scale"}, {"shift"}}; }
  static std::vector<AttrSpec> attrs() {
    return {{"eps", AttrType::Float, false, AttrValue(1e-5), "added to the variance", AttrRange::above(0)}};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    expect_features(ctx, 1, 4);
    return ctx.in[0];
  }
  // Three rows of one value per feature: the factor s·γ, then backward's two sums over rows.
  static int64_t scratch(const InferCtx& ctx, const ValueInfo&) { return 3 * ctx.in[0].shape[1]; }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    auto x = args.in[0].mat();
    auto y = args.out.mat();
    const int64_t n = x.cols();
    auto m = args.in[1].mat(1, n);
    auto factor = args.scratch.mat(1, n);
    const T eps = static_cast<T>(args.attr().get_float("eps"));
    factor.array() = (args.in[2].mat(1, n).array() + eps).rsqrt() * args.in[3].mat(1, n).array();
    auto shift = args.in[4].mat(1, n);
    parallel_rows(x.rows(), n, [&](int64_t begin, int64_t count) {
      for (int64_t r = begin; r < begin + count; ++r) {
        y.row(r).array() = (x.row(r) - m).array() * factor.array() + shift.array();
      }
    });
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    auto x = args.in[0].mat();
    auto gy = args.gout.mat();
    const int64_t n = x.cols();
    auto m = args.in[1].mat(1, n);
    auto factor = args.scratch.mat(1, n);  // s·γ, from forward
    auto dy_sum = args.scratch.mat(3, n).row(1);
    auto dy_x_sum = args.scratch.mat(3, n).row(2);
    parallel_columns(x.rows(), n, [&](int64_t c, int64_t w) {
      auto dy_sum_c = dy_sum.segment(c, w);
      auto dy_x_sum_c = dy_x_sum.segment(c, w);
      const auto factor_c = factor.row(0).segment(c, w).array();
      const auto mc = m.row(0).segment(c, w);
      dy_sum_c.setZero();
      dy_x_sum_c.setZero();
      for (int64_t r = 0; r < x.rows(); ++r) {
        const auto gyc = gy.row(r).segment(c, w);
        if (args.gin[0]) args.gin[0].mat().row(r).segment(c, w).array() += gyc.array() * factor_c;
        dy_sum_c += gyc;
        dy_x_sum_c.array() += gyc.array() * (x.row(r).segment(c, w) - mc).array();
      }
    });
    const T eps = static_cast<T>(args.attr().get_float("eps"));
    const auto s = (args.in[2].mat(1, n).array() + eps).rsqrt();
    if (args.gin[1]) args.gin[1].mat(1, n).array() -= factor.array() * dy_sum.array();
    if (args.gin[2]) args.gin[2].mat(1, n).array() -= T(0.5) * s.square() * factor.array() * dy_x_sum.array();
    if (args.gin[3]) args.gin[3].mat(1, n).array() += s * dy_x_sum.array();
    if (args.gin[4]) args.gin[4].mat(1, n) += dy_sum;
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({4, 3}, uniform(-2, 2)), b.real({3}, uniform(-1, 1)), b.real({3}, uniform(0.5, 2)),
             b.real({3}, uniform(-2, 2)), b.real({3}, uniform(-1, 1))});
    b.check({b.real({3, 2}, uniform(-2, 2)), b.real({2}, uniform(-1, 1)), b.real({2}, uniform(0.01, 0.1)),
             b.real({2}, uniform(-2, 2)), b.real({2}, uniform(-1, 1))},
            {{"eps", 0.01}}, "small variance, eps");
  }
};

// l2_normalize_columns: y_rj = x_rj / s_j, s_j = sqrt(Σ_r x_rj² + eps): each feature scaled
// to unit norm over the rows of the batch (the column half of the authors' sparsity cost
// of their denoising autoencoders; l2_normalize is the row half).
//   dx_rj = (dy_rj − y_rj Σ_r' y_r'j dy_r'j) / s_j.
struct L2NormalizeColumns {
  static constexpr const char* kName = "l2_normalize_columns";
  static constexpr const char* kSummary = "x / sqrt(sum over the rows of x^2 + eps), per column";
  static std::vector<InputSlot> inputs() { return {{"x"}}; }
  static std::vector<AttrSpec> attrs() {
    return {{"eps", AttrType::Float, false, AttrValue(1e-6), "added to the squared norm", AttrRange::at_least(0)}};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, 2);
    return ctx.in[0];
  }
  // One value per column: s_j from forward, then backward's Σ_r y_rj dy_rj.
  static int64_t scratch(const InferCtx& ctx, const ValueInfo&) { return 2 * ctx.in[0].shape[1]; }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    auto x = args.in[0].mat();
    auto y = args.out.mat();
    const int64_t n = x.cols();
    auto norm = args.scratch.mat(2, n).row(0);
    const T eps = static_cast<T>(args.attr().get_float("eps"));
    parallel_columns(x.rows(), n, [&](int64_t c, int64_t w) {
      auto norm_c = norm.segment(c, w);
      norm_c.setZero();
      for (int64_t r = 0; r < x.rows(); ++r) norm_c.array() += x.row(r).segment(c, w).array().square();
      norm_c.array() = (norm_c.array() + eps).sqrt();
      for (int64_t r = 0; r < x.rows(); ++r) y.row(r).segment(c, w).array() = x.row(r).segment(c, w).array() / norm_c.array();
    });
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    auto y = args.out.mat();
    auto gy = args.gout.mat();
    auto gx = args.gin[0].mat();
    const int64_t n = y.cols();
    auto norm = args.scratch.mat(2, n).row(0);  // from forward
    auto dot = args.scratch.mat(2, n).row(1);
    parallel_columns(y.rows(), n, [&](int64_t c, int64_t w) {
      auto dot_c = dot.segment(c, w);
      const auto norm_c = norm.segment(c, w).array();
      dot_c.setZero();
      for (int64_t r = 0; r < y.rows(); ++r) dot_c.array() += y.row(r).segment(c, w).array() * gy.row(r).segment(c, w).array();
      for (int64_t r = 0; r < y.rows(); ++r) {
        gx.row(r).segment(c, w).array() +=
            (gy.row(r).segment(c, w).array() - y.row(r).segment(c, w).array() * dot_c.array()) / norm_c;
      }
    });
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({5, 3}, uniform(-2, 2))});
    b.check({b.real({1, 4}, uniform(-2, 2))}, {}, "one row");
    b.check({b.real({4, 2}, uniform(-0.1, 0.1))}, {{"eps", 0.01}}, "small columns, eps");
  }
};

void register_normalization_ops(OpRegistry& r) {
  r.add<BatchVariance>();
  r.add<Normalize>();
  r.add<L2NormalizeColumns>();
}

}  // namespace pens
