// Noise ops: the stochastic ops a perturb pass inserts into child models. Each draws
// from its NoiseStream, a pure function of the tape's NoiseKey (seed, step) and the
// node's stream, so a step replays exactly and finite differences see the same noise
// on every evaluation.
#include <algorithm>

#include "pens/ops/check_case.h"
#include "pens/ops/parallel.h"
#include "pens/ops/registry.h"

namespace pens {

namespace {
AttrSpec stream_attr() {
  return {"stream", AttrType::Int, false, {},
          "noise stream id; default: a hash of the node name"};
}

// Noise on rows b.. of a batch (graph/passes/restrict_rows.cpp computes a child on the
// rows its penalties read) draws what the whole batch's draw has there.
AttrSpec row_offset_attr() {
  return {"row_offset", AttrType::Int, false, AttrValue(int64_t{0}),
          "the input's first row is this row of the batch the draw is made for", AttrRange::at_least(0)};
}

// Runs draw(offset, n, first) for the stretches of the input's elements that lie
// contiguously in the draw of the whole (global) batch: n elements at `offset` of the
// input, element `first` of that draw onwards. The input's rows start at row_offset of
// the tape's batch, which the tape may place in a global batch (ops/random.h, RowRun).
template <class T, class Draw>
void draw_rows(const KernelArgs<T>& args, const Draw& draw) {
  const int64_t rows = args.in[0].shape.rank > 0 ? args.in[0].shape[0] : 1;
  if (rows == 0) return;
  const int64_t width = args.in[0].size() / rows;
  args.noise.for_rows(args.attr().get_int("row_offset"), rows, [&](int64_t row, int64_t global, int64_t n) {
    draw(row * width, n * width, global * width);
  });
}
}  // namespace

// dropout: y = x ∘ m, m_i = s with probability 1 − p and 0 otherwise, s = 1/(1 − p)
// (inverted dropout) or 1 (rescale = 0).  dx = dy ∘ m.
// The mask lives in scratch memory from forward to backward.
struct Dropout {
  static constexpr const char* kName = "dropout";
  static constexpr const char* kSummary = "Bernoulli keep-mask (keep 1-p), kept values scaled by 1/(1-p)";
  static constexpr bool kStochastic = true;
  static constexpr bool kRowWise = true;  // with row_offset, rows draw as in the whole batch
  static std::vector<InputSlot> inputs() { return {{"x"}}; }
  static std::vector<AttrSpec> attrs() {
    return {{"p", AttrType::Float, false, AttrValue(0.5), "drop probability", AttrRange::from_below(0, 1)},
            {"rescale", AttrType::Int, false, AttrValue(int64_t{1}), "1: scale kept values by 1/(1-p); 0: leave them",
             AttrRange::from_to(0, 1)},
            stream_attr(), row_offset_attr()};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, -1);  // p's range is checked with the attributes
    return ctx.in[0];
  }
  static int64_t scratch(const InferCtx& ctx, const ValueInfo&) { return ctx.in[0].shape.numel(); }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    const double p = args.attr().get_float("p");
    const T scale = args.attr().get_int("rescale") ? static_cast<T>(1.0 / (1.0 - p)) : T(1);
    draw_rows(args, [&](int64_t at, int64_t n, int64_t first) {
      args.noise.bernoulli(args.scratch.data + at, n, 1.0 - p, scale, first);
    });
    parallel_ranges(args.out.size(), [&](int64_t begin, int64_t n) {
      args.out.arr().segment(begin, n) = args.in[0].arr().segment(begin, n) * args.scratch.arr().segment(begin, n);
    });
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    parallel_ranges(args.out.size(), [&](int64_t begin, int64_t n) {
      args.gin[0].arr().segment(begin, n) += args.gout.arr().segment(begin, n) * args.scratch.arr().segment(begin, n);
    });
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({4, 6})}, {{"p", 0.5}}, "p=0.5");
    b.check({b.real({3, 5})}, {{"p", 0.2}, {"rescale", int64_t{0}}}, "p=0.2, no rescale");
    b.check({b.real({3, 5})}, {{"p", 0.5}, {"row_offset", int64_t{7}}}, "rows 7.. of a batch");
  }
};

// gaussian_noise: y = x + σ ε, ε ~ N(0, 1) elementwise.  dx = dy.
// On a parameter this is weight fuzzing: the gradient at θ + σε reaches θ.
struct GaussianNoise {
  static constexpr const char* kName = "gaussian_noise";
  static constexpr const char* kSummary = "additive Gaussian noise sigma*N(0,1)";
  static constexpr bool kStochastic = true;
  static constexpr bool kRowWise = true;  // with row_offset, rows draw as in the whole batch
  static std::vector<InputSlot> inputs() { return {{"x"}}; }
  static std::vector<AttrSpec> attrs() {
    return {{"sigma", AttrType::Float, false, AttrValue(0.1), "standard deviation", AttrRange::at_least(0)},
            stream_attr(), row_offset_attr()};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, -1);  // sigma's range is checked with the attributes
    return ctx.in[0];
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    const auto sigma = static_cast<T>(args.attr().get_float("sigma"));
    draw_rows(args, [&](int64_t at, int64_t n, int64_t first) {
      args.noise.add_normal(args.in[0].data + at, args.out.data + at, n, sigma, first);
    });
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    parallel_ranges(args.out.size(), [&](int64_t begin, int64_t n) {
      args.gin[0].arr().segment(begin, n) += args.gout.arr().segment(begin, n);
    });
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({3, 4})}, {{"sigma", 0.3}});
    b.check({b.real({3, 4})}, {{"sigma", 0.3}, {"row_offset", int64_t{5}}}, "rows 5.. of a batch");
  }
};

// lookup_noise: y[p, :] = x[p, :] + σ ε[ids[p]·W .. ids[p]·W + W − 1], with ε the stream's
// normal draw over a whole [V, W] table. When x holds rows ids looked up from a table, y
// equals the lookup from the table fuzzed by gaussian_noise with the same stream, at the
// cost of the rows alone (graph/passes/lookup_first.cpp makes that rewrite). dx = dy.
struct LookupNoise {
  static constexpr const char* kName = "lookup_noise";
  static constexpr const char* kSummary = "Gaussian noise on looked-up rows, drawn as for the whole table";
  static constexpr bool kStochastic = true;
  static std::vector<InputSlot> inputs() { return {{"x"}, {"ids", DType::Index, false}}; }
  static std::vector<AttrSpec> attrs() {
    return {{"sigma", AttrType::Float, false, AttrValue(0.1), "standard deviation", AttrRange::at_least(0)},
            stream_attr()};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, 2);
    infer::expect(ctx, 1, 1);
    if (ctx.in[1].shape[0] != ctx.in[0].shape[0]) {
      ctx.fail(cat("ids are ", ctx.in[1].shape.str(), " but x is ", ctx.in[0].shape.str(), ": one id per row"));
    }
    return ctx.in[0];
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    const int64_t rows = args.in[0].shape[0], width = args.in[0].shape[1];
    const auto sigma = static_cast<T>(args.attr().get_float("sigma"));
    for (int64_t p = 0; p < rows; ++p) {
      const auto id = static_cast<int64_t>(args.in[1][p]);
      if (id < 0) throw Error(cat("lookup_noise: id ", id, " at row ", p, " is negative"));
      args.noise.normal_at(args.out.data + p * width, id * width, width, sigma);
    }
    args.out.arr() += args.in[0].arr();
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    args.gin[0].arr() += args.gout.arr();
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({4, 3}), b.index_values({2, 0, 2, 5})}, {{"sigma", 0.3}});
  }
};

// subset: `keep` distinct indices out of 0..n-1, sorted, uniformly at random (a partial
// Fisher-Yates shuffle in scratch memory). Subspace sampling gathers parameters with
// them. No inputs, so no gradient.
struct Subset {
  static constexpr const char* kName = "subset";
  static constexpr const char* kSummary = "keep random distinct indices of 0..n-1 (subspace sampling)";
  static constexpr bool kStochastic = true;
  static std::vector<InputSlot> inputs() { return {}; }
  static std::vector<AttrSpec> attrs() {
    return {{"n", AttrType::Int, true, {}, "size of the index range"},
            {"keep", AttrType::Int, true, {}, "indices drawn, 1 <= keep <= n"},
            stream_attr()};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    const int64_t n = ctx.attrs().get_int("n"), keep = ctx.attrs().get_int("keep");
    if (n < 1 || keep < 1 || keep > n) ctx.fail(cat("needs 1 <= keep <= n, got keep ", keep, " of ", n));
    return {Shape{keep}, DType::Index};
  }
  static int64_t scratch(const InferCtx& ctx, const ValueInfo&) { return ctx.attrs().get_int("n"); }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    T* pool = args.scratch.data;
    const int64_t n = args.scratch.size(), keep = args.out.size();
    for (int64_t i = 0; i < n; ++i) pool[i] = static_cast<T>(i);
    for (int64_t j = 0; j < keep; ++j) {
      const auto offset = static_cast<int64_t>(args.noise.uniform(static_cast<uint64_t>(j)) *
                                               static_cast<double>(n - j));
      std::swap(pool[j], pool[j + std::min(offset, n - j - 1)]);
    }
    std::copy_n(pool, keep, args.out.data);
    std::sort(args.out.data, args.out.data + keep);
  }
  template <class T>
  static void backward(const KernelArgs<T>&) {}
  // Nothing to differentiate; tests check the draws.
  static void check(CheckBuilder& b) { b.check({}, {{"n", int64_t{7}}, {"keep", int64_t{3}}}); }
};

// probe: a value found from gradients inside the forward pass (VAT's adversarial
// direction). Its body, a graph the pseudo-ensemble builder attaches to the node
// (graph/graph.h, ProbeBody), runs on a tape of its own: the tape computes this node by
// its noise kind's probe function, not by a kernel. The input, the value the probe's
// result will perturb, sets its shape and orders it after that value; no gradient flows
// through it (the outer objective holds the probe's result constant).
struct Probe {
  static constexpr const char* kName = "probe";
  static constexpr const char* kSummary = "a perturbation computed from gradients of its body graph (VAT)";
  static constexpr bool kStochastic = true;
  static std::vector<InputSlot> inputs() { return {{"x", DType::Real, /*differentiable=*/false}}; }
  static std::vector<AttrSpec> attrs() { return {stream_attr()}; }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, -1);
    return ctx.in[0];
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    args.fail("a probe node runs through its body on the tape; this one has none");
  }
  template <class T>
  static void backward(const KernelArgs<T>&) {}
  // No gradient and no value of its own: tests/autodiff/test_probe.cpp checks what the
  // tape computes through it against finite differences of its body.
  static void check(CheckBuilder&) {}
};

void register_noise_ops(OpRegistry& r) {
  r.add<Dropout>();
  r.add<GaussianNoise>();
  r.add<LookupNoise>();
  r.add<Subset>();
  r.add<Probe>();
}

}  // namespace pens
