// Normalizations along the last axis, one row at a time (every leading axis counts as
// rows). Row loops keep Eigen from materializing per-row reductions in temporaries.
#include <cmath>

#include "pens/ops/check_case.h"
#include "pens/ops/registry.h"

namespace pens {

namespace {
template <class Op>
struct RowwiseOp {
  static std::vector<InputSlot> inputs() { return {{"x"}}; }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, -1);
    if (ctx.in[0].shape.rank == 0) ctx.fail("needs at least one axis");
    return ctx.in[0];
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({3, 5}, uniform(-2, 2))}, {}, "matrix");
    b.check({b.real({2, 2, 3}, uniform(-2, 2))}, {}, "rank 3");
  }
};
}  // namespace

// softmax: y_j = e^{x_j} / Σ_k e^{x_k} per row.  dx = y ∘ (dy − ⟨dy, y⟩).
struct Softmax : RowwiseOp<Softmax> {
  static constexpr const char* kName = "softmax";
  static constexpr const char* kSummary = "softmax along the last axis";
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    auto x = args.in[0].mat();
    auto y = args.out.mat();
    for (int64_t r = 0; r < x.rows(); ++r) {
      const T m = x.row(r).maxCoeff();
      y.row(r) = (x.row(r).array() - m).exp().matrix();
      y.row(r) /= y.row(r).sum();
    }
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    auto y = args.out.mat();
    auto gy = args.gout.mat();
    auto gx = args.gin[0].mat();
    for (int64_t r = 0; r < y.rows(); ++r) {
      const T dot = gy.row(r).dot(y.row(r));
      gx.row(r).array() += y.row(r).array() * (gy.row(r).array() - dot);
    }
  }
};

// log_softmax: y_j = x_j − log Σ_k e^{x_k} per row.  dx = dy − softmax(x) Σ dy.
struct LogSoftmax : RowwiseOp<LogSoftmax> {
  static constexpr const char* kName = "log_softmax";
  static constexpr const char* kSummary = "log of softmax along the last axis, computed stably";
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    auto x = args.in[0].mat();
    auto y = args.out.mat();
    for (int64_t r = 0; r < x.rows(); ++r) {
      const T m = x.row(r).maxCoeff();
      const T lse = m + std::log((x.row(r).array() - m).exp().sum());
      y.row(r).array() = x.row(r).array() - lse;
    }
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    auto y = args.out.mat();
    auto gy = args.gout.mat();
    auto gx = args.gin[0].mat();
    for (int64_t r = 0; r < y.rows(); ++r) {
      const T total = gy.row(r).sum();
      gx.row(r).array() += gy.row(r).array() - y.row(r).array().exp() * total;
    }
  }
};

// l2_normalize: y = x / s per row, s = sqrt(‖x‖² + eps) (eps keeps zero rows finite;
// the authors' V^c uses 1e-6).  dx = (dy − y ⟨y, dy⟩) / s.
struct L2Normalize : RowwiseOp<L2Normalize> {
  static constexpr const char* kName = "l2_normalize";
  static constexpr const char* kSummary = "x / sqrt(|x|^2 + eps) along the last axis";
  static std::vector<AttrSpec> attrs() {
    return {{"eps", AttrType::Float, false, AttrValue(1e-6), "added to the squared norm"}};
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    auto x = args.in[0].mat();
    auto y = args.out.mat();
    const T eps = static_cast<T>(args.attr().get_float("eps"));
    for (int64_t r = 0; r < x.rows(); ++r) {
      y.row(r) = x.row(r) / std::sqrt(x.row(r).squaredNorm() + eps);
    }
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    auto x = args.in[0].mat();
    auto y = args.out.mat();
    auto gy = args.gout.mat();
    auto gx = args.gin[0].mat();
    const T eps = static_cast<T>(args.attr().get_float("eps"));
    for (int64_t r = 0; r < x.rows(); ++r) {
      const T s = std::sqrt(x.row(r).squaredNorm() + eps);
      const T dot = y.row(r).dot(gy.row(r));
      gx.row(r) += (gy.row(r) - dot * y.row(r)) / s;
    }
  }
};

// pseudo_label: y = one_hot(argmax_j x_j) on each row whose largest softmax probability
// reaches `threshold`, a zero row elsewhere (the first largest entry on ties): the class
// a confident prediction picks as a target. Piecewise constant, so no gradient flows back.
struct PseudoLabel : RowwiseOp<PseudoLabel> {
  static constexpr const char* kName = "pseudo_label";
  static constexpr const char* kSummary = "one-hot argmax of each row whose max softmax >= threshold, else 0";
  static std::vector<InputSlot> inputs() { return {{"x", DType::Real, /*differentiable=*/false}}; }
  static std::vector<AttrSpec> attrs() {
    return {{"threshold", AttrType::Float, false, AttrValue(0.0), "least max probability that labels a row"}};
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    auto x = args.in[0].mat();
    auto y = args.out.mat();
    const double threshold = args.attr().get_float("threshold");
    y.setZero();
    for (int64_t r = 0; r < x.rows(); ++r) {
      Eigen::Index best = 0;
      const T m = x.row(r).maxCoeff(&best);
      const double max_prob = 1.0 / static_cast<double>((x.row(r).array() - m).exp().sum());
      if (max_prob >= threshold) y(r, best) = T(1);
    }
  }
  template <class T>
  static void backward(const KernelArgs<T>&) {}
  // Nothing to differentiate: tests/ops/test_op_values.cpp checks the values.
  static void check(CheckBuilder& b) {
    b.check({b.real({4, 5}, uniform(-2, 2))}, {{"threshold", 0.3}});
  }
};

void register_rowwise_ops(OpRegistry& r) {
  r.add<Softmax>();
  r.add<LogSoftmax>();
  r.add<L2Normalize>();
  r.add<PseudoLabel>();
}

}  // namespace pens
