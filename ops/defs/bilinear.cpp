// The compact bilinear form of the paper's tensor network (section 5): for each output
// unit k, t_k = v1ᵀ T_k v2 with T_k an n×m slice of the tensor T (k×n×m).
#include "pens/ops/bilinear.h"

#include <type_traits>

#include "pens/ops/check_case.h"
#include "pens/ops/gemm.h"
#include "pens/ops/registry.h"

namespace pens {

// bilinear: y[b,k] = Σ_ij v1[b,i] T[k,i,j] v2[b,j], T of shape [k, n, m]. Two forms,
// chosen by the batch's row count B alone (so a shape always computes the same way):
//
// Up to kOuterRows rows, one product over the rows' outer products: X[b, i·m + j] =
// v1[b,i] v2[b,j] (B × nm), T read as a k × nm matrix, y = X Tᵀ; backward dT += dyᵀ X
// and dX = dy T (one product each), then dv1[b,i] += Σ_j dX[b, i·m + j] v2[b,j] and
// dv2[b,j] += Σ_i dX[b, i·m + j] v1[b,i]. The scratch holds X (kept from forward for
// backward) and dX. A tree's levels are a few rows wide, and there one product per
// slice T_k packs its operands for little work. Up to kStreamRows rows the three
// products are not packed at all but run output by output (y[:,k] = X T_kᵀ,
// dT_k += dy[:,k]ᵀ X, dX += dy[:,k] T_k), so T and dT pass through the cache once:
// packing T, a new matrix for every fuzzed tree, cost more than a one-row level's product.
//
// Above it, one product per slice: u = v1 T_k, y[:,k] = rowsum(u ⊙ v2); backward
// dv1 += diag(dy[:,k]) v2 T_kᵀ, dv2 += diag(dy[:,k]) v1 T_k, dT_k += v1ᵀ diag(dy[:,k]) v2.
// The scratch holds one [B, max(n, m)] product at a time: a forest of 64 trees has
// levels of hundreds of rows, whose X would be megabytes per level.
//
// On oneDNN (a tape whose products run in float32-onednn) the forward pass above
// kOuterRows is the outer-product form again, kChunkRows rows at a time, one oneDNN
// product per chunk: its kernel runs that shape faster than Eigen's runs the slices
// (docs/performance.md); the scratch then also holds one chunk's X.
struct Bilinear {
  static constexpr const char* kName = "bilinear";
  static constexpr const char* kSummary = "t_k = v1ᵀ T_k v2 per row, T of shape [k, n, m]";
  static constexpr int64_t kOuterRows = 32;
  static constexpr int64_t kStreamRows = 8;
  static constexpr int64_t kChunkRows = 64;
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
    const int64_t rows = ctx.in[0].shape[0];
    const Shape& t = ctx.in[1].shape;
    if (rows <= kOuterRows) return 2 * rows * t[1] * t[2];
    // On oneDNN, the forward pass's outer products of a chunk of rows; backward's slices.
    const int64_t slices = rows * std::max(t[1], t[2]);
    return ctx.precision == Precision::Float32 ? slices : std::max(slices, std::min(rows, kChunkRows) * t[1] * t[2]);
  }
  template <class T>
  using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  template <class T>
  static auto slice(const TensorView<const T>& t, int64_t k) {
    return t.mat(t.shape[1] * t.shape[0], t.shape[2]).block(k * t.shape[1], 0, t.shape[1], t.shape[2]);
  }
  // Row b of x (B × n·m) = vec(v1[b]ᵀ v2[b]).
  template <class V, class X>
  static void outer_products(const V& v1, const V& v2, X&& x) {
    using T = typename std::remove_cvref_t<X>::Scalar;
    for (int64_t b = 0; b < v1.rows(); ++b) {
      Eigen::Map<RowMajor<T>>(x.row(b).data(), v1.cols(), v2.cols()).noalias() = v1.row(b).transpose() * v2.row(b);
    }
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    auto v1 = args.in[0].mat();
    auto v2 = args.in[2].mat();
    auto y = args.out.mat();
    const int64_t rows = v1.rows(), n = v1.cols(), m = v2.cols();
    if (rows <= kOuterRows) {
      auto x = args.scratch.mat(rows, n * m);
      outer_products(v1, v2, x);
      const auto t = args.in[1].mat(args.in[1].shape[0], n * m);
      if (rows <= kStreamRows) {
        for (int64_t k = 0; k < t.rows(); ++k) y.col(k).noalias() = x * t.row(k).transpose();
      } else {
        gemm(y, x, t.transpose(), false, args.precision);
      }
      return;
    }
    if (args.precision != Precision::Float32) {
      const auto t = args.in[1].mat(args.in[1].shape[0], n * m);
      for (int64_t r = 0; r < rows; r += kChunkRows) {
        const int64_t c = std::min(kChunkRows, rows - r);
        auto x = args.scratch.mat(c, n * m);
        outer_products(v1.middleRows(r, c), v2.middleRows(r, c), x);
        gemm(y.middleRows(r, c), x, t.transpose(), false, args.precision);
      }
      return;
    }
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
    if (rows <= kOuterRows) {
      const auto x = args.scratch.mat(rows, n * m);
      const auto t = args.in[1].mat(args.in[1].shape[0], n * m);
      const bool stream = rows <= kStreamRows;
      if (args.gin[1]) {
        auto gt = args.gin[1].mat(t.rows(), n * m);
        if (stream) {
          for (int64_t k = 0; k < t.rows(); ++k) gt.row(k).noalias() += gy.col(k).transpose() * x;
        } else {
          gemm(gt, gy.transpose(), x, true);
        }
      }
      if (!args.gin[0] && !args.gin[2]) return;
      auto dx = TensorView<T>{args.scratch.data + rows * n * m, Shape{rows, n * m}}.mat();
      if (stream) {
        dx.setZero();
        for (int64_t k = 0; k < t.rows(); ++k) dx.noalias() += gy.col(k) * t.row(k);
      } else {
        gemm(dx, gy, t, false);
      }
      for (int64_t b = 0; b < rows; ++b) {
        const Eigen::Map<const RowMajor<T>> db(dx.row(b).data(), n, m);
        if (args.gin[0]) args.gin[0].mat().row(b).noalias() += (db * v2.row(b).transpose()).transpose();
        if (args.gin[2]) args.gin[2].mat().row(b).noalias() += v1.row(b) * db;
      }
      return;
    }
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
    // Past kStreamRows: the outer products' packed products; past kOuterRows: a product per slice.
    b.check({b.real({12, 2}), b.real({2, 2, 3}), b.real({12, 3})}, {}, "12 rows, packed products");
    b.check({b.real({33, 2}), b.real({2, 2, 3}), b.real({33, 3})}, {}, "33 rows, a product per slice");
  }
};

void register_bilinear_ops(OpRegistry& r) { r.add<Bilinear>(); }

void add_bilinear_weight_gradient(TensorView<const float> v1, TensorView<const float> v2,
                                  TensorView<const float> dy, TensorView<float> dt, std::vector<float>& outer) {
  const int64_t rows = v1.shape[0], n = v1.shape[1], m = v2.shape[1], k = dy.shape[1];
  if (v2.shape[0] != rows || dy.shape[0] != rows || dt.shape.numel() != k * n * m) {
    fail("bilinear weight gradient: v1 ", v1.shape.str(), ", v2 ", v2.shape.str(), ", dy ", dy.shape.str(),
         " and dT ", dt.shape.str(), " do not agree");
  }
  outer.resize(static_cast<size_t>(rows * n * m));
  auto x = TensorView<float>{outer.data(), Shape{rows, n * m}}.mat();
  Bilinear::outer_products(v1.mat(), v2.mat(), x);
  gemm(dt.mat(k, n * m), dy.mat().transpose(), x, true);
}

}  // namespace pens
