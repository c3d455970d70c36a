// Per-example losses: each returns one value per row ([B]); a mean or sum node turns
// them into the scalar objective, and penalties on part of a batch can slice them.
#include <cmath>

#include "pens/ops/check_case.h"
#include "pens/ops/parallel.h"
#include "pens/ops/registry.h"

namespace pens {

namespace {
ValueInfo per_row_loss(const InferCtx& ctx) {
  infer::expect(ctx, 0, 2);
  infer::expect(ctx, 1, 1);
  if (ctx.in[1].shape[0] != ctx.in[0].shape[0]) {
    ctx.fail(cat("scores are ", ctx.in[0].shape.str(), " but labels are ", ctx.in[1].shape.str()));
  }
  return {Shape{ctx.in[0].shape[0]}, DType::Real};
}

template <class T>
int64_t label_of(const KernelArgs<T>& args, int64_t row) {
  const T raw = args.in[1][row];
  const auto y = static_cast<int64_t>(raw);
  const int64_t classes = args.in[0].shape[1];
  if (y < 0 || y >= classes || static_cast<T>(y) != raw) {
    args.fail("label ", raw, " of row ", row, " is not a class in [0, ", classes, ")");
  }
  return y;
}
}  // namespace

// softmax_xent: l_b = log Σ_c e^{z_bc} − z_b,y_b.  dz_b = dl_b (softmax(z_b) − onehot(y_b)).
// The scratch keeps softmax(z) from forward for backward.
struct SoftmaxXent {
  static constexpr const char* kName = "softmax_xent";
  static constexpr const char* kSummary = "cross-entropy of softmax(scores) with integer labels, per row";
  static std::vector<InputSlot> inputs() {
    return {{"scores"}, {"labels", DType::Index, false}};
  }
  static ValueInfo infer(const InferCtx& ctx) { return per_row_loss(ctx); }
  static int64_t scratch(const InferCtx& ctx, const ValueInfo&) { return ctx.in[0].shape.numel(); }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    auto z = args.in[0].mat();
    auto p = args.scratch.mat(z.rows(), z.cols());
    for (int64_t r = 0; r < z.rows(); ++r) {
      const int64_t y = label_of(args, r);
      const T m = z.row(r).maxCoeff();
      p.row(r) = (z.row(r).array() - m).exp().matrix();
      const T total = p.row(r).sum();
      p.row(r) /= total;
      args.out[r] = m + std::log(total) - z(r, y);
    }
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    auto p = args.scratch.mat(args.in[0].shape.rows(), args.in[0].shape.cols());
    auto gz = args.gin[0].mat();
    for (int64_t r = 0; r < p.rows(); ++r) {
      const T g = args.gout[r];
      gz.row(r) += g * p.row(r);
      gz(r, static_cast<int64_t>(args.in[1][r])) -= g;
    }
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({4, 5}, uniform(-2, 2)), b.index({4}, 5)});
  }
};

// squared_hinge: one-vs-all, t_c = +1 for the label and −1 elsewhere,
// l_b = Σ_c max(0, 1 − t_c s_bc)².  ds_bc = −2 t_c max(0, 1 − t_c s_bc) dl_b.
struct SquaredHinge {
  static constexpr const char* kName = "squared_hinge";
  static constexpr const char* kSummary = "one-vs-all squared hinge loss with integer labels, per row";
  static std::vector<InputSlot> inputs() {
    return {{"scores"}, {"labels", DType::Index, false}};
  }
  static ValueInfo infer(const InferCtx& ctx) { return per_row_loss(ctx); }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    auto s = args.in[0].mat();
    for (int64_t r = 0; r < s.rows(); ++r) {
      const int64_t y = label_of(args, r);
      T total = 0;
      for (int64_t c = 0; c < s.cols(); ++c) {
        const T t = c == y ? T(1) : T(-1);
        const T slack = std::max(T(0), T(1) - t * s(r, c));
        total += slack * slack;
      }
      args.out[r] = total;
    }
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    auto s = args.in[0].mat();
    auto gs = args.gin[0].mat();
    for (int64_t r = 0; r < s.rows(); ++r) {
      const auto y = static_cast<int64_t>(args.in[1][r]);
      for (int64_t c = 0; c < s.cols(); ++c) {
        const T t = c == y ? T(1) : T(-1);
        const T slack = std::max(T(0), T(1) - t * s(r, c));
        gs(r, c) += T(-2) * t * slack * args.gout[r];
      }
    }
  }
  static void check(CheckBuilder& b) {
    // Scores away from ±1, where the hinge bends.
    b.check({b.real({4, 3}, away_from(-2.5, 2.5, {-1, 1}, 0.05)), b.index({4}, 3)});
  }
};

// squared_error: l_b = Σ_j (a_bj − b_bj)² over all but the first axis.
// da = 2 (a − b) dl, db = −2 (a − b) dl.
struct SquaredError {
  static constexpr const char* kName = "squared_error";
  static constexpr const char* kSummary = "sum of squared differences per row";
  static std::vector<InputSlot> inputs() { return {{"a"}, {"b"}}; }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, -1);
    infer::expect(ctx, 1, -1);
    if (ctx.in[0].shape != ctx.in[1].shape) {
      ctx.fail(cat("a is ", ctx.in[0].shape.str(), " but b is ", ctx.in[1].shape.str()));
    }
    if (ctx.in[0].shape.rank == 0) ctx.fail("needs at least one axis (the rows)");
    return {Shape{ctx.in[0].shape[0]}, DType::Real};
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    const int64_t rows = args.in[0].shape[0];
    const int64_t cols = args.in[0].size() / rows;
    auto a = args.in[0].mat(rows, cols);
    auto b = args.in[1].mat(rows, cols);
    parallel_rows(rows, cols, [&](int64_t begin, int64_t n) {
      for (int64_t r = begin; r < begin + n; ++r) args.out[r] = (a.row(r) - b.row(r)).squaredNorm();
    });
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    const int64_t rows = args.in[0].shape[0];
    const int64_t cols = args.in[0].size() / rows;
    auto a = args.in[0].mat(rows, cols);
    auto b = args.in[1].mat(rows, cols);
    parallel_rows(rows, cols, [&](int64_t begin, int64_t n) {
      for (int64_t r = begin; r < begin + n; ++r) {
        const T g = T(2) * args.gout[r];
        if (args.gin[0]) args.gin[0].mat(rows, cols).row(r) += g * (a.row(r) - b.row(r));
        if (args.gin[1]) args.gin[1].mat(rows, cols).row(r) -= g * (a.row(r) - b.row(r));
      }
    });
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({3, 4}), b.real({3, 4})}, {}, "matrix");
    b.check({b.real({2, 2, 3}), b.real({2, 2, 3})}, {}, "rank 3");
  }
};

void register_loss_ops(OpRegistry& r) {
  r.add<SoftmaxXent>();
  r.add<SquaredHinge>();
  r.add<SquaredError>();
}

}  // namespace pens
