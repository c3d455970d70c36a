// Ops that move elements without arithmetic: concat, slice, stop_gradient, parent_value, gather,
// gather_axes, embedding. Along an axis, a tensor of any rank is [outer, axis, inner]:
// blocks of `inner` contiguous elements, which is how concat, slice, gather and embedding
// address their data.
#include <algorithm>
#include <array>
#include <cstring>

#include "pens/ops/check_case.h"
#include "pens/ops/registry.h"

namespace pens {

namespace {
template <class T>
int64_t checked_index(const KernelArgs<T>& args, T raw, int64_t bound) {
  const auto i = static_cast<int64_t>(raw);
  if (i < 0 || i >= bound || static_cast<T>(i) != raw) {
    args.fail("index ", raw, " is out of range [0, ", bound, ")");
  }
  return i;
}
}  // namespace

// concat: inputs joined along `axis`. dx_k = the matching block of dy.
struct Concat {
  static constexpr const char* kName = "concat";
  static constexpr const char* kSummary = "join inputs along an axis";
  static constexpr bool kVariadic = true;
  static std::vector<InputSlot> inputs() { return {{"x"}}; }
  static std::vector<AttrSpec> attrs() {
    return {{"axis", AttrType::Int, false, AttrValue(int64_t{-1}), "axis to join along"}};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    for (size_t i = 0; i < ctx.in.size(); ++i) infer::expect(ctx, i, ctx.in[0].shape.rank);
    const int axis = ctx.axis("axis", ctx.in[0].shape.rank);
    Shape out = ctx.in[0].shape;
    for (size_t i = 1; i < ctx.in.size(); ++i) {
      const Shape& s = ctx.in[i].shape;
      for (int d = 0; d < s.rank; ++d) {
        if (d != axis && s[d] != out[d]) {
          ctx.fail(cat("input ", i, " has shape ", s.str(), ", which does not fit ",
                       ctx.in[0].shape.str(), " outside axis ", axis));
        }
      }
      out[axis] += s[axis];
    }
    return {out, DType::Real};
  }
  // The output is `outer` blocks of `out_block` elements; input k fills `block(k)` of
  // each, starting at the sum of the earlier inputs' blocks.
  struct Layout {
    int axis;
    int64_t outer, inner, out_block;
    int64_t block(const Shape& in) const { return in[axis] * inner; }
  };
  static Layout layout(const Attributes& attrs, const Shape& out) {
    const int axis = resolve_axis(attrs.get_int("axis"), out.rank);
    return {axis, out.outer(axis), out.inner(axis), out[axis] * out.inner(axis)};
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    const Layout l = layout(args.attr(), args.out.shape);
    int64_t offset = 0;
    for (const auto& x : args.in) {
      const int64_t block = l.block(x.shape);
      for (int64_t o = 0; o < l.outer; ++o) {
        std::copy_n(x.data + o * block, block, args.out.data + o * l.out_block + offset);
      }
      offset += block;
    }
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    const Layout l = layout(args.attr(), args.out.shape);
    int64_t offset = 0;
    for (size_t k = 0; k < args.in.size(); ++k) {
      const int64_t block = l.block(args.in[k].shape);
      if (T* g = args.gin[k].data) {
        for (int64_t o = 0; o < l.outer; ++o) {
          const T* src = args.gout.data + o * l.out_block + offset;
          for (int64_t j = 0; j < block; ++j) g[o * block + j] += src[j];
        }
      }
      offset += block;
    }
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({2, 3}), b.real({2, 1}), b.real({2, 2})}, {}, "columns");
    b.check({b.real({1, 3}), b.real({2, 3})}, {{"axis", int64_t{0}}}, "rows");
    b.check({b.real({2, 2, 2}), b.real({2, 1, 2})}, {{"axis", int64_t{1}}}, "middle axis");
  }
};

// slice: x[begin:end] along `axis`. dx = dy placed back into the sliced range.
struct Slice {
  static constexpr const char* kName = "slice";
  static constexpr const char* kSummary = "elements begin..end-1 along an axis";
  static std::vector<InputSlot> inputs() { return {{"x"}}; }
  static std::vector<AttrSpec> attrs() {
    return {{"axis", AttrType::Int, false, AttrValue(int64_t{-1}), "axis to slice"},
            {"begin", AttrType::Int, true, {}, "first index kept"},
            {"end", AttrType::Int, false, {}, "one past the last index kept; default: the end"}};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, -1);
    const int axis = ctx.axis("axis", ctx.in[0].shape.rank);
    const int64_t begin = ctx.attrs().get_int("begin");
    const int64_t end = ctx.attrs().has("end") ? ctx.attrs().get_int("end") : ctx.in[0].shape[axis];
    if (begin < 0 || end <= begin || end > ctx.in[0].shape[axis]) {
      ctx.fail(cat("range [", begin, ", ", end, ") does not fit axis ", axis, " of ",
                   ctx.in[0].shape.str()));
    }
    Shape out = ctx.in[0].shape;
    out[axis] = end - begin;
    return {out, DType::Real};
  }
  struct Layout {
    int64_t outer, in_block, out_block, offset;
  };
  static Layout layout(const Attributes& attrs, const Shape& in) {
    const int axis = resolve_axis(attrs.get_int("axis"), in.rank);
    const int64_t inner = in.inner(axis);
    const int64_t end = attrs.has("end") ? attrs.get_int("end") : in[axis];
    const int64_t width = end - attrs.get_int("begin");
    return {in.outer(axis), in[axis] * inner, width * inner, attrs.get_int("begin") * inner};
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    const Layout l = layout(args.attr(), args.in[0].shape);
    for (int64_t o = 0; o < l.outer; ++o) {
      std::copy_n(args.in[0].data + o * l.in_block + l.offset, l.out_block,
                  args.out.data + o * l.out_block);
    }
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    const Layout l = layout(args.attr(), args.in[0].shape);
    for (int64_t o = 0; o < l.outer; ++o) {
      T* g = args.gin[0].data + o * l.in_block + l.offset;
      const T* src = args.gout.data + o * l.out_block;
      for (int64_t j = 0; j < l.out_block; ++j) g[j] += src[j];
    }
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({3, 5})}, {{"begin", int64_t{1}}, {"end", int64_t{4}}}, "columns");
    b.check({b.real({4, 2})}, {{"axis", int64_t{0}}, {"begin", int64_t{2}}, {"end", int64_t{4}}},
            "rows");
    b.check({b.real({5, 2})}, {{"axis", int64_t{0}}, {"begin", int64_t{1}}}, "rows to the end");
  }
};

// y = x: the shape and the forward pass of stop_gradient and parent_value.
struct Identity {
  static constexpr bool kRowWise = true;
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, -1);
    return ctx.in[0];
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    std::copy_n(args.in[0].data, args.in[0].size(), args.out.data);
  }
};

// stop_gradient: y = x, and no gradient flows back to x: a penalty's target side (the
// other side of the pair learns to agree with it, the target does not move towards the
// other), a teacher's prediction, a pseudo-label's source.
struct StopGradient : Identity {
  static constexpr const char* kName = "stop_gradient";
  static constexpr const char* kSummary = "y = x, with no gradient back to x (a target)";
  static std::vector<InputSlot> inputs() { return {{"x", DType::Real, /*differentiable=*/false}}; }
  template <class T>
  static void backward(const KernelArgs<T>&) {}
  // Nothing to differentiate: tests/ops/test_op_values.cpp checks the value and that no
  // gradient passes.
  static void check(CheckBuilder& b) { b.check({b.real({3, 4})}, {}); }
};

// parent_value: y = x, and the gradient passes through. Its meaning is the perturb pass's
// (graph/passes/perturb.cpp): in a pseudo-ensemble's children it is the parent's x, not
// the child's own copy, so a child can compute with what the clean network computed (a
// ladder network normalises its estimates with the clean encoder's batch statistics).
struct ParentValue : Identity {
  static constexpr const char* kName = "parent_value";
  static constexpr const char* kSummary = "y = x; in children, the parent's x";
  static std::vector<InputSlot> inputs() { return {{"x"}}; }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    T* g = args.gin[0].data;
    for (int64_t i = 0; i < args.gout.size(); ++i) g[i] += args.gout.data[i];
  }
  static void check(CheckBuilder& b) { b.check({b.real({3, 4})}, {}); }
};

// gather: y[.., j, ..] = x[.., idx[j], ..] along `axis` (subspace sampling slices
// parameters this way). dx[.., idx[j], ..] += dy[.., j, ..]: repeated indices add up.
struct Gather {
  static constexpr const char* kName = "gather";
  static constexpr const char* kSummary = "pick entries idx along an axis (rows, columns, slices)";
  static std::vector<InputSlot> inputs() {
    return {{"x"}, {"indices", DType::Index, false}};
  }
  static std::vector<AttrSpec> attrs() {
    return {{"axis", AttrType::Int, false, AttrValue(int64_t{0}), "axis to gather along"}};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, -1);
    infer::expect(ctx, 1, 1);
    const int axis = ctx.axis("axis", ctx.in[0].shape.rank);
    Shape out = ctx.in[0].shape;
    out[axis] = ctx.in[1].shape[0];
    return {out, DType::Real};
  }
  // x is [outer, dim, inner] along the axis; y is [outer, picked, inner].
  struct Layout {
    int64_t outer, dim, inner, picked;
  };
  static Layout layout(const Attributes& attrs, const Shape& x, int64_t picked) {
    const int axis = resolve_axis(attrs.get_int("axis"), x.rank);
    return {x.outer(axis), x[axis], x.inner(axis), picked};
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    const Layout l = layout(args.attr(), args.in[0].shape, args.in[1].size());
    for (int64_t o = 0; o < l.outer; ++o) {
      for (int64_t j = 0; j < l.picked; ++j) {
        const int64_t i = checked_index(args, args.in[1][j], l.dim);
        std::copy_n(args.in[0].data + (o * l.dim + i) * l.inner, l.inner,
                    args.out.data + (o * l.picked + j) * l.inner);
      }
    }
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    const Layout l = layout(args.attr(), args.in[0].shape, args.in[1].size());
    for (int64_t o = 0; o < l.outer; ++o) {
      for (int64_t j = 0; j < l.picked; ++j) {
        const auto i = static_cast<int64_t>(args.in[1][j]);
        T* g = args.gin[0].data + (o * l.dim + i) * l.inner;
        const T* src = args.gout.data + (o * l.picked + j) * l.inner;
        for (int64_t k = 0; k < l.inner; ++k) g[k] += src[k];
      }
    }
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({4, 3}), b.index_values({2, 0, 2})}, {}, "rows, repeated");
    b.check({b.real({3, 5}), b.index_values({4, 1})}, {{"axis", int64_t{1}}}, "columns");
    b.check({b.real({3, 4, 2}), b.index_values({3, 0})}, {{"axis", int64_t{1}}}, "rank 3");
  }
};

// gather_axes: the same indices along several axes at once, y[i, j, ..] = x[f0(i), f1(j), ..]
// with f = idx on the listed axes and the identity elsewhere (subspace sampling keeps the
// same latent dimensions on every latent axis of a parameter: T[idx, idx, idx]). One pass,
// where a gather per axis would write each intermediate slice, and its gradient, in full.
// dx[f0(i), f1(j), ..] += dy[i, j, ..].
struct GatherAxes {
  static constexpr const char* kName = "gather_axes";
  static constexpr const char* kSummary = "pick the same entries idx along each of several axes (T[idx, idx, idx])";
  static std::vector<InputSlot> inputs() {
    return {{"x"}, {"indices", DType::Index, false}};
  }
  static std::vector<AttrSpec> attrs() {
    return {{"axes", AttrType::Ints, true, {}, "distinct axes to gather along (negative counts from the end)"}};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, -1);
    infer::expect(ctx, 1, 1);
    Shape out = ctx.in[0].shape;
    std::array<bool, kMaxRank> seen{};
    const auto& axes = ctx.attrs().get_ints("axes");
    if (axes.empty()) ctx.fail("axes must name at least one axis");
    for (int64_t a : axes) {
      if (a < -out.rank || a >= out.rank) ctx.fail(cat("axis ", a, " is out of range for rank ", out.rank));
      const int axis = resolve_axis(a, out.rank);
      if (seen[static_cast<size_t>(axis)]) ctx.fail(cat("axis ", a, " is listed twice"));
      seen[static_cast<size_t>(axis)] = true;
      out[axis] = ctx.in[1].shape[0];
    }
    return {out, DType::Real};
  }
  // Calls row(x offset of the row's start, y offset, inner offsets) for every innermost row
  // of y, in order: an odometer over y's other axes, each position mapped through the
  // indices where the axis is gathered; inner[j] is the x offset of the row's element j
  // from that start. `touched` is the array laid out as x that the rows read or write:
  // each row's span of it is prefetched a few rows ahead, since the rows of a subspace's
  // slice (1,225 rows of 35 for T) lie in no order the hardware's prefetcher follows, and
  // waiting for them took a tenth of a subspace model's epoch.
  template <class T, class Row>
  static void walk(const KernelArgs<T>& args, const T* touched, Row row) {
    const Shape& x = args.in[0].shape;
    const int rank = x.rank;
    const T* idx = args.in[1].data;
    std::array<bool, kMaxRank> gathered{};
    for (int64_t a : args.attr().get_ints("axes")) gathered[static_cast<size_t>(resolve_axis(a, rank))] = true;
    std::array<int64_t, kMaxRank> stride{}, at{};
    for (int d = rank - 1; d >= 0; --d) {
      stride[static_cast<size_t>(d)] = d + 1 < rank ? stride[static_cast<size_t>(d + 1)] * x[d + 1] : 1;
    }
    const auto source = [&](int d, int64_t j) {
      const auto u = static_cast<size_t>(d);
      return (gathered[u] ? static_cast<int64_t>(idx[j]) : j) * stride[u];
    };
    const Shape& y = args.out.shape;
    if (y.numel() == 0) return;
    // The innermost offsets, found once: on the stack up to kInner (no allocation on a
    // step's path), else on the heap.
    constexpr int64_t kInner = 512;
    const int64_t width = y[rank - 1];
    std::array<int64_t, kInner> listed{};
    std::vector<int64_t> wide(width > kInner ? static_cast<size_t>(width) : 0);
    int64_t* inner = width > kInner ? wide.data() : listed.data();
    for (int64_t j = 0; j < width; ++j) inner[j] = source(rank - 1, j);
    const auto [low, high] = std::minmax_element(inner, inner + width);
    const int64_t first = *low, span = *high - *low + 1;
    const auto row_base = [&] {
      int64_t base = 0;
      for (int d = 0; d + 1 < rank; ++d) base += source(d, at[static_cast<size_t>(d)]);
      return base;
    };
    const auto advance = [&] {
      for (int d = rank - 2; d >= 0; --d) {
        if (++at[static_cast<size_t>(d)] < y[d]) return;
        at[static_cast<size_t>(d)] = 0;
      }
    };
    constexpr int kAhead = 4;
    std::array<int64_t, kAhead> ahead{};  // the bases of the next rows, a ring
    const int64_t rows = y.numel() / width;
    int64_t queued = 0;
    const auto queue_next = [&] {
      if (queued >= rows) return;
      const int64_t base = row_base();
      ahead[static_cast<size_t>(queued % kAhead)] = base;
      const char* p = reinterpret_cast<const char*>(touched + base + first);
      for (int64_t b = 0; b < span * static_cast<int64_t>(sizeof(T)); b += 64) __builtin_prefetch(p + b);
      if (++queued < rows) advance();
    };
    for (int k = 0; k < kAhead; ++k) queue_next();
    for (int64_t r = 0, o = 0; r < rows; ++r, o += width) {
      row(ahead[static_cast<size_t>(r % kAhead)], o, static_cast<const int64_t*>(inner));
      queue_next();
    }
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    const Shape& x = args.in[0].shape;
    for (int64_t a : args.attr().get_ints("axes")) {
      const int64_t dim = x[resolve_axis(a, x.rank)];
      for (int64_t j = 0; j < args.in[1].size(); ++j) checked_index(args, args.in[1][j], dim);
    }
    const int64_t width = args.out.shape[args.out.shape.rank - 1];
    const T* in = args.in[0].data;
    T* out = args.out.data;
    walk(args, in, [&](int64_t base, int64_t o, const int64_t* inner) {
      const T* from = in + base;
      T* to = out + o;
      for (int64_t j = 0; j < width; ++j) to[j] = from[inner[j]];
    });
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    // Indices may repeat: each element is added on its own, in order.
    const int64_t width = args.out.shape[args.out.shape.rank - 1];
    T* gx = args.gin[0].data;
    const T* gy = args.gout.data;
    walk(args, static_cast<const T*>(gx), [&](int64_t base, int64_t o, const int64_t* inner) {
      for (int64_t j = 0; j < width; ++j) gx[base + inner[j]] += gy[o + j];
    });
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({4, 4, 4}), b.index_values({3, 0, 2})}, {{"axes", std::vector<int64_t>{0, 1, 2}}},
            "every axis of a cube");
    b.check({b.real({4, 3}), b.index_values({2, 2})}, {{"axes", std::vector<int64_t>{0}}}, "rows, repeated");
    b.check({b.real({3, 2, 3}), b.index_values({1, 0})}, {{"axes", std::vector<int64_t>{0, -1}}},
            "first and last of rank 3");
    b.check({b.real({2, 3, 3, 2}), b.index_values({2})}, {{"axes", std::vector<int64_t>{1, 2}}}, "rank 4");
    b.check({b.real({2, 520}), b.index_values({1})}, {{"axes", std::vector<int64_t>{0}}},
            "an innermost axis wider than the offsets listed once");
  }
};

// embedding: y[p, :] = table[ids[p], :], ids of any shape. dtable[ids[p], :] += dy[p, :].
struct Embedding {
  static constexpr const char* kName = "embedding";
  static constexpr const char* kSummary = "look up rows of a table by id (word vectors)";
  static std::vector<InputSlot> inputs() {
    return {{"table"}, {"ids", DType::Index, false}};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, 2);
    infer::expect(ctx, 1, -1);
    const Shape& ids = ctx.in[1].shape;
    if (ids.rank >= kMaxRank) ctx.fail(cat("ids of shape ", ids.str(), " have too many axes"));
    Shape out = ids;
    out[out.rank++] = ctx.in[0].shape[1];
    return {out, DType::Real};
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    const int64_t vocab = args.in[0].shape[0], dim = args.in[0].shape[1];
    for (int64_t p = 0, n = args.in[1].size(); p < n; ++p) {
      const int64_t id = checked_index(args, args.in[1][p], vocab);
      std::copy_n(args.in[0].data + id * dim, dim, args.out.data + p * dim);
    }
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    const int64_t dim = args.in[0].shape[1];
    for (int64_t p = 0, n = args.in[1].size(); p < n; ++p) {
      const auto id = static_cast<int64_t>(args.in[1][p]);
      T* g = args.gin[0].data + id * dim;
      const T* src = args.gout.data + p * dim;
      for (int64_t k = 0; k < dim; ++k) g[k] += src[k];
    }
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({5, 3}), b.index_values({1, 4, 1, 0})});
  }
};

void register_shape_ops(OpRegistry& r) {
  r.add<Concat>();
  r.add<Slice>();
  r.add<StopGradient>();
  r.add<ParentValue>();
  r.add<Gather>();
  r.add<GatherAxes>();
  r.add<Embedding>();
}

}  // namespace pens
