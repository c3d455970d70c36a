// Noise ops: the stochastic ops a perturb pass inserts into child models. Each draws
// from its NoiseStream, a pure function of the tape's NoiseKey (seed, step) and the
// node's stream, so a step replays exactly and finite differences see the same noise
// on every evaluation.
#include "ops/check_case.h"
#include "ops/registry.h"

namespace pens {

namespace {
AttrSpec stream_attr() {
  return {"stream", AttrType::Int, false, {},
          "noise stream id; default: a hash of the node name"};
}
}  // namespace

// dropout: y = x ∘ m, m_i = s with probability 1 − p and 0 otherwise, s = 1/(1 − p)
// (inverted dropout) or 1 (rescale = 0).  dx = dy ∘ m.
// The mask lives in scratch memory from forward to backward.
struct Dropout {
  static constexpr const char* kName = "dropout";
  static constexpr const char* kSummary = "Bernoulli keep-mask (keep 1-p), kept values scaled by 1/(1-p)";
  static constexpr bool kStochastic = true;
  static std::vector<InputSlot> inputs() { return {{"x"}}; }
  static std::vector<AttrSpec> attrs() {
    return {{"p", AttrType::Float, false, AttrValue(0.5), "drop probability, in [0, 1)"},
            {"rescale", AttrType::Int, false, AttrValue(int64_t{1}),
             "1: scale kept values by 1/(1-p); 0: leave them"},
            stream_attr()};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, -1);
    const double p = ctx.attrs().get_float("p");
    if (!(p >= 0.0 && p < 1.0)) ctx.fail(cat("p must be in [0, 1), got ", p));
    return ctx.in[0];
  }
  static int64_t scratch(const InferCtx& ctx, const ValueInfo&) { return ctx.in[0].shape.numel(); }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    const double p = args.attr().get_float("p");
    const T scale = args.attr().get_int("rescale") ? static_cast<T>(1.0 / (1.0 - p)) : T(1);
    args.noise.bernoulli(args.scratch.data, args.scratch.size(), 1.0 - p, scale);
    args.out.arr() = args.in[0].arr() * args.scratch.arr();
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    args.gin[0].arr() += args.gout.arr() * args.scratch.arr();
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({4, 6})}, {{"p", 0.5}}, "p=0.5");
    b.check({b.real({3, 5})}, {{"p", 0.2}, {"rescale", int64_t{0}}}, "p=0.2, no rescale");
  }
};

// gaussian_noise: y = x + σ ε, ε ~ N(0, 1) elementwise.  dx = dy.
// On a parameter this is weight fuzzing: the gradient at θ + σε reaches θ.
struct GaussianNoise {
  static constexpr const char* kName = "gaussian_noise";
  static constexpr const char* kSummary = "additive Gaussian noise sigma*N(0,1)";
  static constexpr bool kStochastic = true;
  static std::vector<InputSlot> inputs() { return {{"x"}}; }
  static std::vector<AttrSpec> attrs() {
    return {{"sigma", AttrType::Float, false, AttrValue(0.1), "standard deviation, >= 0"},
            stream_attr()};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, -1);
    const double sigma = ctx.attrs().get_float("sigma");
    if (!(sigma >= 0.0)) ctx.fail(cat("sigma must be >= 0, got ", sigma));
    return ctx.in[0];
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    args.noise.normal(args.out.data, args.out.size(), static_cast<T>(args.attr().get_float("sigma")));
    args.out.arr() += args.in[0].arr();
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    args.gin[0].arr() += args.gout.arr();
  }
  static void check(CheckBuilder& b) { b.check({b.real({3, 4})}, {{"sigma", 0.3}}); }
};

void register_noise_ops(OpRegistry& r) {
  r.add<Dropout>();
  r.add<GaussianNoise>();
}

}  // namespace pens
