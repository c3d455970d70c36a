// Elementwise ops. Binary ones broadcast numpy-style (ops/broadcast.h); unary ones are
// Eigen array expressions, vectorized by Eigen. Large ones run in ranges on the thread
// pool (parallel_ranges).
#include <cmath>
#include <optional>
#include <type_traits>

#include "pens/ops/broadcast.h"
#include "pens/ops/check_case.h"
#include "pens/ops/parallel.h"
#include "pens/ops/registry.h"

namespace pens {

namespace {

// The commonest broadcast (a bias, a per-feature scale): one operand has the output's
// shape, the other is one row of it ([cols], or [1, cols] and the like) repeated down its
// rows. Such ops run by rows on the pool; other broadcasts take the general walk.
struct RowBroadcast {
  int64_t rows, cols;
  bool a_full;  // a is the full operand, b the row
};

std::optional<RowBroadcast> row_broadcast(const Shape& out, const Shape& a, const Shape& b) {
  if (out.rank == 0 || (a != out && b != out)) return std::nullopt;
  const Shape& row = a == out ? b : a;
  const int64_t cols = out[out.rank - 1];
  if (row.rank == 0 || row[row.rank - 1] != cols || row.numel() != cols || cols == 0) return std::nullopt;
  return RowBroadcast{out.numel() / cols, cols, a == out};
}

// Shared body of add, sub, mul. Op supplies f(a, b) and its partial derivatives.
template <class Op>
struct BinaryOp {
  static constexpr bool kRowWise = true;  // broadcasting aligns rows of the batch
  static std::vector<InputSlot> inputs() { return {{"a"}, {"b"}}; }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, -1);
    infer::expect(ctx, 1, -1);
    return {infer::broadcast(ctx, ctx.in[0].shape, ctx.in[1].shape), DType::Real};
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    const T* a = args.in[0].data;
    const T* b = args.in[1].data;
    T* y = args.out.data;
    if (args.in[0].shape == args.in[1].shape) {
      parallel_ranges(args.out.size(), [&](int64_t begin, int64_t n) {
        for (int64_t i = begin; i < begin + n; ++i) y[i] = Op::f(a[i], b[i]);
      });
      return;
    }
    if (const auto rb = row_broadcast(args.out.shape, args.in[0].shape, args.in[1].shape)) {
      const auto run = [&](auto a_full) {
        constexpr bool kAFull = decltype(a_full)::value;
        const T* full = kAFull ? a : b;
        const T* row = kAFull ? b : a;
        const int64_t cols = rb->cols;
        parallel_rows(rb->rows, cols, [&](int64_t begin, int64_t n) {
          for (int64_t r = begin; r < begin + n; ++r) {
            for (int64_t j = 0; j < cols; ++j) {
              const T x = full[r * cols + j];
              y[r * cols + j] = kAFull ? Op::f(x, row[j]) : Op::f(row[j], x);
            }
          }
        });
      };
      rb->a_full ? run(std::true_type{}) : run(std::false_type{});
      return;
    }
    walk(make_walk(args.out.shape, args.in[0].shape, args.in[1].shape),
         [&](int64_t i, int64_t ia, int64_t ib) { y[i] = Op::f(a[ia], b[ib]); });
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    const T* a = args.in[0].data;
    const T* b = args.in[1].data;
    const T* gy = args.gout.data;
    T* ga = args.gin[0].data;
    T* gb = args.gin[1].data;
    if (args.in[0].shape == args.in[1].shape) {
      parallel_ranges(args.out.size(), [&](int64_t begin, int64_t n) {
        if (ga) for (int64_t i = begin; i < begin + n; ++i) ga[i] += gy[i] * Op::da(a[i], b[i]);
        if (gb) for (int64_t i = begin; i < begin + n; ++i) gb[i] += gy[i] * Op::db(a[i], b[i]);
      });
      return;
    }
    if (const auto rb = row_broadcast(args.out.shape, args.in[0].shape, args.in[1].shape)) {
      // The full operand's gradient by rows; the row operand's sums down the rows by
      // columns, each column's in the order the general walk below adds them.
      const auto run = [&](auto a_full) {
        constexpr bool kAFull = decltype(a_full)::value;
        const T* full = kAFull ? a : b;
        const T* row = kAFull ? b : a;
        T* g_full = kAFull ? ga : gb;
        T* g_row = kAFull ? gb : ga;
        const auto d_full = [](T x, T r) { return kAFull ? Op::da(x, r) : Op::db(r, x); };
        const auto d_row = [](T x, T r) { return kAFull ? Op::db(x, r) : Op::da(r, x); };
        const int64_t rows = rb->rows, cols = rb->cols;
        if (g_full) {
          parallel_rows(rows, cols, [&](int64_t begin, int64_t n) {
            for (int64_t r = begin; r < begin + n; ++r) {
              for (int64_t j = 0; j < cols; ++j) {
                const int64_t i = r * cols + j;
                g_full[i] += gy[i] * d_full(full[i], row[j]);
              }
            }
          });
        }
        if (g_row) {
          parallel_columns(rows, cols, [&](int64_t begin, int64_t n) {
            for (int64_t r = 0; r < rows; ++r) {
              for (int64_t j = begin; j < begin + n; ++j) g_row[j] += gy[r * cols + j] * d_row(full[r * cols + j], row[j]);
            }
          });
        }
      };
      rb->a_full ? run(std::true_type{}) : run(std::false_type{});
      return;
    }
    walk(make_walk(args.out.shape, args.in[0].shape, args.in[1].shape),
         [&](int64_t i, int64_t ia, int64_t ib) {
           if (ga) ga[ia] += gy[i] * Op::da(a[ia], b[ib]);
           if (gb) gb[ib] += gy[i] * Op::db(a[ia], b[ib]);
         });
  }
  static void check(CheckBuilder& b) {
    b.check({b.real({3, 4}), b.real({3, 4})}, {}, "same shape");
    b.check({b.real({3, 4}), b.real({4})}, {}, "row broadcast");
    b.check({b.real({1, 4}), b.real({3, 4})}, {}, "row broadcast, the row first");
    b.check({b.real({3, 1}), b.real({3, 4})}, {}, "column broadcast");
    b.check({b.real({2, 1, 4}), b.real({3, 1})}, {}, "both broadcast");
    b.check({b.real({3, 4}), b.real(Shape{})}, {}, "scalar");
  }
};

// Shared body of the unary ops. Op supplies value(x) and derivative(x, y) as Eigen
// array expressions, and a sampler that keeps check inputs inside the domain and away
// from kinks.
template <class Op>
struct UnaryOp {
  static constexpr bool kRowWise = true;
  static std::vector<InputSlot> inputs() { return {{"x"}}; }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, -1);
    return ctx.in[0];
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    parallel_ranges(args.out.size(), [&](int64_t begin, int64_t n) {
      args.out.arr().segment(begin, n) = Op::value(args.in[0].arr().segment(begin, n));
    });
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    parallel_ranges(args.out.size(), [&](int64_t begin, int64_t n) {
      args.gin[0].arr().segment(begin, n) +=
          args.gout.arr().segment(begin, n) *
          Op::derivative(args.in[0].arr().segment(begin, n), args.out.arr().segment(begin, n));
    });
  }
  static void check(CheckBuilder& b) { b.check({b.real({3, 4}, Op::sampler())}); }
};

}  // namespace

// add: y = a + b.  da = 1, db = 1.
struct Add : BinaryOp<Add> {
  static constexpr const char* kName = "add";
  static constexpr const char* kSummary = "a + b (broadcasting)";
  template <class T> static T f(T a, T b) { return a + b; }
  template <class T> static T da(T, T) { return T(1); }
  template <class T> static T db(T, T) { return T(1); }
};

// sub: y = a - b.  da = 1, db = -1.
struct Sub : BinaryOp<Sub> {
  static constexpr const char* kName = "sub";
  static constexpr const char* kSummary = "a - b (broadcasting)";
  template <class T> static T f(T a, T b) { return a - b; }
  template <class T> static T da(T, T) { return T(1); }
  template <class T> static T db(T, T) { return T(-1); }
};

// mul: y = a ∘ b.  da = b, db = a.
struct Mul : BinaryOp<Mul> {
  static constexpr const char* kName = "mul";
  static constexpr const char* kSummary = "a * b elementwise (broadcasting)";
  template <class T> static T f(T a, T b) { return a * b; }
  template <class T> static T da(T, T b) { return b; }
  template <class T> static T db(T a, T) { return a; }
};

// scale: y = factor · x.  dx = factor.
struct Scale {
  static constexpr const char* kName = "scale";
  static constexpr const char* kSummary = "factor * x, factor an attribute";
  static constexpr bool kRowWise = true;
  static std::vector<InputSlot> inputs() { return {{"x"}}; }
  static std::vector<AttrSpec> attrs() {
    return {{"factor", AttrType::Float, true, {}, "the multiplier"}};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, -1);
    return ctx.in[0];
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    args.out.arr() = static_cast<T>(args.attr().get_float("factor")) * args.in[0].arr();
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    args.gin[0].arr() += static_cast<T>(args.attr().get_float("factor")) * args.gout.arr();
  }
  static void check(CheckBuilder& b) { b.check({b.real({3, 4})}, {{"factor", -2.5}}); }
};

// relu: y = max(x, 0).  dx = [x > 0].
struct Relu : UnaryOp<Relu> {
  static constexpr const char* kName = "relu";
  static constexpr const char* kSummary = "max(x, 0)";
  template <class X> static auto value(const X& x) { return x.max(typename X::Scalar(0)); }
  template <class X, class Y> static auto derivative(const X& x, const Y&) {
    return (x > typename X::Scalar(0)).template cast<typename X::Scalar>();
  }
  static Sampler sampler() { return away_from(-2, 2, {0}, 0.05); }
};

// abs: y = |x|.  dx = sign(x) (0 at 0); the L1 activity penalty of autoencoders.
struct Abs : UnaryOp<Abs> {
  static constexpr const char* kName = "abs";
  static constexpr const char* kSummary = "|x|";
  template <class X> static auto value(const X& x) { return x.abs(); }
  template <class X, class Y> static auto derivative(const X& x, const Y&) {
    return x.sign();
  }
  static Sampler sampler() { return away_from(-2, 2, {0}, 0.05); }
};

// tanh: y = tanh(x).  dx = 1 - y².
struct Tanh : UnaryOp<Tanh> {
  static constexpr const char* kName = "tanh";
  static constexpr const char* kSummary = "hyperbolic tangent";
  template <class X> static auto value(const X& x) { return x.tanh(); }
  template <class X, class Y> static auto derivative(const X&, const Y& y) {
    return typename Y::Scalar(1) - y.square();
  }
  static Sampler sampler() { return uniform(-2, 2); }
};

// sigmoid: y = 1 / (1 + e^-x).  dx = y (1 - y).
struct Sigmoid : UnaryOp<Sigmoid> {
  static constexpr const char* kName = "sigmoid";
  static constexpr const char* kSummary = "logistic function 1/(1+exp(-x))";
  template <class X> static auto value(const X& x) {
    using S = typename X::Scalar;
    return S(1) / (S(1) + (-x).exp());
  }
  template <class X, class Y> static auto derivative(const X&, const Y& y) {
    return y * (typename Y::Scalar(1) - y);
  }
  static Sampler sampler() { return uniform(-3, 3); }
};

// exp: y = e^x.  dx = y.
struct Exp : UnaryOp<Exp> {
  static constexpr const char* kName = "exp";
  static constexpr const char* kSummary = "e^x";
  template <class X> static auto value(const X& x) { return x.exp(); }
  template <class X, class Y> static auto derivative(const X&, const Y& y) { return y; }
  static Sampler sampler() { return uniform(-2, 2); }
};

// log: y = ln x (x > 0).  dx = 1 / x.
struct Log : UnaryOp<Log> {
  static constexpr const char* kName = "log";
  static constexpr const char* kSummary = "natural logarithm";
  template <class X> static auto value(const X& x) { return x.log(); }
  template <class X, class Y> static auto derivative(const X& x, const Y&) { return x.inverse(); }
  static Sampler sampler() { return uniform(0.2, 3); }
};

// square: y = x².  dx = 2x.
struct Square : UnaryOp<Square> {
  static constexpr const char* kName = "square";
  static constexpr const char* kSummary = "x^2";
  template <class X> static auto value(const X& x) { return x.square(); }
  template <class X, class Y> static auto derivative(const X& x, const Y&) {
    return typename X::Scalar(2) * x;
  }
  static Sampler sampler() { return uniform(-2, 2); }
};

void register_elementwise_ops(OpRegistry& r) {
  r.add<Add>();
  r.add<Sub>();
  r.add<Mul>();
  r.add<Scale>();
  r.add<Relu>();
  r.add<Abs>();
  r.add<Tanh>();
  r.add<Sigmoid>();
  r.add<Exp>();
  r.add<Log>();
  r.add<Square>();
}

}  // namespace pens
