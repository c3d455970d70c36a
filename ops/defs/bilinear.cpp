// The compact bilinear form of the paper's tensor network (section 5): for each output
// unit k, t_k = v1ᵀ T_k v2 with T_k an n×m slice of the tensor T (k×n×m).
#include "pens/ops/check_case.h"
#include "pens/ops/registry.h"

namespace pens {

// bilinear: y[b,k] = Σ_ij v1[b,i] T[k,i,j] v2[b,j].
//   dv1[b,:] += Σ_k dy[b,k] T_k v2[b,:]ᵀ
//   dv2[b,:] += Σ_k dy[b,k] v1[b,:] T_k
//   dT_k     += v1ᵀ diag(dy[:,k]) v2
// One small GEMM per slice; the scratch holds one [B, max(n, m)] product at a time.
struct Bilinear {
  static constexpr const char* kName = "bilinear";
  static constexpr const char* kSummary = "t_k = v1ᵀ T_k v2 per row, T of shape [k, n, m]";
  static std::vector<InputSlot> inputs() { return {{"v1"}, {"T"}, {"v2"}}; }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, 2);
    infer::expect(ctx, 1, 3);
    infer::expect(ctx, 2, 2);
    const Shape& v1 = ctx.in[0].shape;
    const Shape& t = ctx.in[1].shape;
    const Shape& v2 = ctx.in[2].shape;
    if (v1[0] != v2[0]) ctx.fail(cat("v1 is ", v1.str(), " but v2 is ", v2.str()));
    if (t[1] != v1[1] || t[2] != v2[1]) {
      ctx.fail(cat("T is ", t.str(), " but v1 is ", v1.str(), " and v2 is ", v2.str()));
    }
    return {Shape{v1[0], t[0]}, DType::Real};
  }
  static int64_t scratch(const InferCtx& ctx, const ValueInfo&) {
    const Shape& t = ctx.in[1].shape;
    return ctx.in[0].shape[0] * std::max(t[1], t[2]);
  }
  template <class T>
  static auto slice(const TensorView<const T>& t, int64_t k) {
    return t.mat(t.shape[1] * t.shape[0], t.shape[2]).block(k * t.shape[1], 0, t.shape[1], t.shape[2]);
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    auto v1 = args.in[0].mat();
    auto v2 = args.in[2].mat();
    auto y = args.out.mat();
    const int64_t rows = v1.rows(), m = v2.cols();
    auto u = args.scratch.mat(rows, m);
    for (int64_t k = 0; k < y.cols(); ++k) {
      u.noalias() = v1 * slice(args.in[1], k);
      y.col(k) = (u.array() * v2.array()).rowwise().sum().matrix();
    }
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    auto v1 = args.in[0].mat();
    auto v2 = args.in[2].mat();
    auto gy = args.gout.mat();
    const int64_t rows = v1.rows(), n = v1.cols(), m = v2.cols();
    for (int64_t k = 0; k < gy.cols(); ++k) {
      auto tk = slice(args.in[1], k);
      if (args.gin[0]) {
        auto w = args.scratch.mat(rows, n);
        w.noalias() = v2 * tk.transpose();
        args.gin[0].mat().noalias() += gy.col(k).asDiagonal() * w;
      }
      if (args.gin[2]) {
        auto u = args.scratch.mat(rows, m);
        u.noalias() = v1 * tk;
        args.gin[2].mat().noalias() += gy.col(k).asDiagonal() * u;
      }
      if (args.gin[1]) {
        auto s = args.scratch.mat(rows, n);
        s.noalias() = gy.col(k).asDiagonal() * v1;
        auto gt = args.gin[1].mat(args.gin[1].shape[0] * n, m).block(k * n, 0, n, m);
        gt.noalias() += s.transpose() * v2;
      }
    }
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({3, 4}), b.real({2, 4, 5}), b.real({3, 5})}, {}, "rectangular");
    b.check({b.real({1, 3}), b.real({3, 3, 3}), b.real({1, 3})}, {}, "one row, cube");
  }
};

void register_bilinear_ops(OpRegistry& r) { r.add<Bilinear>(); }

}  // namespace pens
