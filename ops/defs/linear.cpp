// Matrix products, by ops/gemm.h: Eigen's GEMM on panels of the result, spread over the
// thread pool.
#include "pens/ops/check_case.h"
#include "pens/ops/gemm.h"
#include "pens/ops/registry.h"

namespace pens {

// matmul: C = op(A) op(B), op(M) = M or Mᵀ per the transpose_a / transpose_b flags.
// With X = op(A), Y = op(B):  dX = dC Yᵀ,  dY = Xᵀ dC,  dA = dX or dXᵀ,  dB = dY or dYᵀ.
struct Matmul {
  static constexpr const char* kName = "matmul";
  static constexpr const char* kSummary = "matrix product op(a)·op(b)";
  static std::vector<InputSlot> inputs() { return {{"a"}, {"b"}}; }
  static std::vector<AttrSpec> attrs() {
    return {{"transpose_a", AttrType::Int, false, AttrValue(int64_t{0}), "use aᵀ"},
            {"transpose_b", AttrType::Int, false, AttrValue(int64_t{0}), "use bᵀ"}};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, 2);
    infer::expect(ctx, 1, 2);
    const Shape& a = ctx.in[0].shape;
    const Shape& b = ctx.in[1].shape;
    const bool ta = ctx.attrs().get_int("transpose_a") != 0;
    const bool tb = ctx.attrs().get_int("transpose_b") != 0;
    const int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1];
    const int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
    if (k != kb) {
      ctx.fail(cat("inner dimensions differ: a is ", a.str(), ta ? "ᵀ" : "", ", b is ", b.str(),
                   tb ? "ᵀ" : ""));
    }
    return {Shape{m, n}, DType::Real};
  }
  // Rows of a·op(b) are rows of a; aᵀ·op(b) mixes them.
  static bool stacks_rows(const Attributes& attrs) { return attrs.get_int("transpose_a") == 0; }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    auto a = args.in[0].mat();
    auto b = args.in[1].mat();
    auto c = args.out.mat();
    const bool ta = args.attr().get_int("transpose_a") != 0;
    const bool tb = args.attr().get_int("transpose_b") != 0;
    if (!ta && !tb) gemm(c, a, b, false, args.precision);
    if (ta && !tb) gemm(c, a.transpose(), b, false, args.precision);
    if (!ta && tb) gemm(c, a, b.transpose(), false, args.precision);
    if (ta && tb) gemm(c, a.transpose(), b.transpose(), false, args.precision);
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    auto a = args.in[0].mat();
    auto b = args.in[1].mat();
    auto gc = args.gout.mat();
    const bool ta = args.attr().get_int("transpose_a") != 0;
    const bool tb = args.attr().get_int("transpose_b") != 0;
    if (args.gin[0]) {
      auto ga = args.gin[0].mat();
      if (!ta && !tb) gemm(ga, gc, b.transpose(), true, args.precision);
      if (!ta && tb) gemm(ga, gc, b, true, args.precision);
      if (ta && !tb) gemm(ga, b, gc.transpose(), true, args.precision);
      if (ta && tb) gemm(ga, b.transpose(), gc.transpose(), true, args.precision);
    }
    if (args.gin[1]) {
      auto gb = args.gin[1].mat();
      if (!ta && !tb) gemm(gb, a.transpose(), gc, true, args.precision);
      if (ta && !tb) gemm(gb, a, gc, true, args.precision);
      if (!ta && tb) gemm(gb, gc.transpose(), a, true, args.precision);
      if (ta && tb) gemm(gb, gc.transpose(), a.transpose(), true, args.precision);
    }
  }
  static void check(CheckBuilder& b) {
    for (int64_t ta = 0; ta < 2; ++ta) {
      for (int64_t tb = 0; tb < 2; ++tb) {
        const auto x = b.real(ta ? Shape{4, 3} : Shape{3, 4});
        const auto y = b.real(tb ? Shape{5, 4} : Shape{4, 5});
        b.check({x, y}, {{"transpose_a", ta}, {"transpose_b", tb}},
                cat("transpose_a=", ta, ",transpose_b=", tb));
      }
    }
  }
};

// affine: y = x W + b (b added to every row).
// dx = dy Wᵀ,  dW = xᵀ dy,  db = Σ_rows dy.
struct Affine {
  static constexpr const char* kName = "affine";
  static constexpr const char* kSummary = "x·W + b, the bias added to every row";
  static constexpr bool kRowWise = true;
  static std::vector<InputSlot> inputs() { return {{"x"}, {"W"}, {"b"}}; }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, 2);
    infer::expect(ctx, 1, 2);
    infer::expect(ctx, 2, 1);
    const Shape& x = ctx.in[0].shape;
    const Shape& w = ctx.in[1].shape;
    const Shape& b = ctx.in[2].shape;
    if (x[1] != w[0]) ctx.fail(cat("x is ", x.str(), " but W is ", w.str()));
    if (b[0] != w[1]) ctx.fail(cat("W is ", w.str(), " but b is ", b.str()));
    return {Shape{x[0], w[1]}, DType::Real};
  }
  static bool stacks_rows(const Attributes&) { return true; }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    gemm_bias(args.out.mat(), args.in[0].mat(), args.in[1].mat(), args.in[2].mat(1, args.in[2].size()).data(),
              args.precision);
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    auto gy = args.gout.mat();
    if (args.gin[0]) gemm(args.gin[0].mat(), gy, args.in[1].mat().transpose(), true, args.precision);
    if (args.gin[1]) gemm(args.gin[1].mat(), args.in[0].mat().transpose(), gy, true, args.precision);
    if (args.gin[2]) add_column_sums(gy, args.gin[2].data);
  }
  // b's gradient: dst[j] += Σ_r dy[r, j], the same bits wherever dst lies. Eigen sums the
  // columns that fill whole aligned packets of its destination one way and the rest
  // another (a different order of adds), so adding into an array whose alignment varied
  // from run to run (a tree tape's gradient of a fuzzed bias) gave other bits each run.
  // The sums are made in an aligned block, as for an aligned destination, then added.
  template <class M, class T>
  static void add_column_sums(const M& gy, T* dst) {
    constexpr int64_t kBlock = 256;  // a multiple of every packet size
    Eigen::Matrix<T, 1, kBlock> sums;
    for (int64_t j = 0; j < gy.cols(); j += kBlock) {
      const int64_t w = std::min(kBlock, gy.cols() - j);
      sums.head(w) = gy.middleCols(j, w).colwise().sum();
      Eigen::Map<Eigen::Matrix<T, 1, Eigen::Dynamic>>(dst + j, w) += sums.head(w);
    }
  }
  static void check(CheckBuilder& b) {
    const auto x = b.real({3, 4});
    const auto w = b.real({4, 5});
    const auto bias = b.real({5});
    b.check({x, w, bias});
  }
};

void register_linear_ops(OpRegistry& r) {
  r.add<Matmul>();
  r.add<Affine>();
}

}  // namespace pens
