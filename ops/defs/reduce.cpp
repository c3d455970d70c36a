// Reductions over axes. The reduced tensor is walked as the "full" shape with the
// result as a broadcast operand (stride 0 along reduced axes), so forward sums into
// the result and backward spreads the gradient back, by the same walk.
#include <algorithm>
#include <string>

#include "pens/ops/broadcast.h"
#include "pens/ops/check_case.h"
#include "pens/ops/parallel.h"
#include "pens/ops/registry.h"

namespace pens {

namespace {

// The result's shape with reduced axes kept as size 1 (what the walk needs), and the
// shape the node reports (reduced axes dropped unless keepdims).
struct Reduction {
  Shape kept;
  Shape reported;
  int64_t count = 1;  // elements summed into each result element
};

// The reduced axes as a bit set. Runs in every step, so it must not allocate.
uint32_t reduced_axes(const Attributes& attrs, int rank, const InferCtx* ctx) {
  auto bad = [&](const std::string& message) {
    if (ctx) ctx->fail(message);
    fail(message);
  };
  const std::vector<int64_t>& listed = attrs.get_ints("axes");
  if (listed.empty()) return (1u << rank) - 1;
  uint32_t axes = 0;
  for (int64_t a : listed) {
    if (a < -rank || a >= rank) bad(cat("axis ", a, " is out of range for rank ", rank));
    const uint32_t bit = 1u << (a < 0 ? a + rank : a);
    if (axes & bit) bad(cat("axis ", a, " is listed twice"));
    axes |= bit;
  }
  return axes;
}

Reduction reduction(const Attributes& attrs, const Shape& in, const InferCtx* ctx = nullptr) {
  const uint32_t axes = reduced_axes(attrs, in.rank, ctx);
  const bool keepdims = attrs.get_int("keepdims") != 0;
  Reduction r;
  r.kept = in;
  r.reported.rank = 0;
  for (int i = 0; i < in.rank; ++i) {
    const bool reduced = (axes >> i) & 1u;
    if (reduced) {
      r.count *= in[i];
      r.kept[i] = 1;
    }
    if (!reduced || keepdims) r.reported[r.reported.rank++] = reduced ? 1 : in[i];
  }
  return r;
}

// A matrix reduced over its rows alone (axis 0): one value per column.
bool over_rows(const Shape& in, const Reduction& r) { return in.rank == 2 && r.kept[0] == 1 && r.kept[1] == in[1]; }

template <bool kMean>
struct ReduceOp {
  static std::vector<InputSlot> inputs() { return {{"x"}}; }
  static std::vector<AttrSpec> attrs() {
    return {{"axes", AttrType::Ints, false, AttrValue(std::vector<int64_t>{}),
             "axes to reduce (negative counts from the end); empty: all"},
            {"keepdims", AttrType::Int, false, AttrValue(int64_t{0}),
             "1: keep reduced axes with size 1"}};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, -1);
    return {reduction(ctx.attrs(), ctx.in[0].shape, &ctx).reported, DType::Real};
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    const Shape& in = args.in[0].shape;
    const Reduction r = reduction(args.attr(), in);
    const T* x = args.in[0].data;
    T* y = args.out.data;
    const T factor = kMean ? T(1) / static_cast<T>(r.count) : T(1);
    // Fast path: summing the last axis of a matrix, or everything.
    if (r.kept.numel() == 1) {
      y[0] = args.in[0].arr().sum() * factor;
      return;
    }
    if (over_rows(in, r)) {  // per-feature sums of a batch: by columns on the pool
      const int64_t rows = in[0], cols = in[1];
      parallel_columns(rows, cols, [&](int64_t c, int64_t n) {
        std::fill(y + c, y + c + n, T(0));
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t j = c; j < c + n; ++j) y[j] += x[i * cols + j];
        }
        if (kMean) for (int64_t j = c; j < c + n; ++j) y[j] *= factor;
      });
      return;
    }
    std::fill(y, y + args.out.size(), T(0));
    walk(make_walk(in, in, r.kept), [&](int64_t, int64_t i, int64_t o) { y[o] += x[i]; });
    if (kMean) args.out.arr() *= factor;
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    const Shape& in = args.in[0].shape;
    const Reduction r = reduction(args.attr(), in);
    const T factor = kMean ? T(1) / static_cast<T>(r.count) : T(1);
    const T* gy = args.gout.data;
    T* gx = args.gin[0].data;
    if (r.kept.numel() == 1) {
      args.gin[0].arr() += gy[0] * factor;
      return;
    }
    if (over_rows(in, r)) {
      const int64_t cols = in[1];
      parallel_rows(in[0], cols, [&](int64_t begin, int64_t n) {
        for (int64_t i = begin; i < begin + n; ++i) {
          for (int64_t j = 0; j < cols; ++j) gx[i * cols + j] += gy[j] * factor;
        }
      });
      return;
    }
    walk(make_walk(in, in, r.kept), [&](int64_t, int64_t i, int64_t o) { gx[i] += gy[o] * factor; });
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({3, 4})}, {}, "all");
    b.check({b.real({3, 4})}, {{"axes", std::vector<int64_t>{-1}}}, "rows");
    b.check({b.real({3, 4})}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{1}}},
            "columns, keepdims");
    b.check({b.real({2, 3, 4})}, {{"axes", std::vector<int64_t>{0, 2}}}, "rank 3");
  }
};

}  // namespace

// sum: y = Σ_axes x.  dx = dy broadcast back over the reduced axes.
struct Sum : ReduceOp<false> {
  static constexpr const char* kName = "sum";
  static constexpr const char* kSummary = "sum over axes (all by default)";
};

// mean: y = Σ_axes x / count.  dx = dy / count, broadcast back.
struct Mean : ReduceOp<true> {
  static constexpr const char* kName = "mean";
  static constexpr const char* kSummary = "mean over axes (all by default)";
};

void register_reduce_ops(OpRegistry& r) {
  r.add<Sum>();
  r.add<Mean>();
}

}  // namespace pens
