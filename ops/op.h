// The contract of an op. Every op is one struct, in one file of ops/defs/, holding all
// there is to know about it:
//
//   kName, kSummary          its name in graphs and files, and one line for `pens ops`
//   inputs()                 its input slots: name, element type, differentiable or not
//   attrs()          (opt.)  its attribute schema
//   kVariadic        (opt.)  the last input slot repeats (concat)
//   kStochastic      (opt.)  draws noise from its NoiseStream; replays exactly per key
//   kRowWise         (opt.)  row i of the output depends on row i of the inputs that have
//                            a batch dimension alone (elementwise ops, affine, noise with
//                            a row_offset): graph/passes/restrict_rows.cpp may compute it
//                            on some rows of a batch only. A stochastic op whose draws
//                            depend on a row's place in the batch must be one, and draw
//                            through NoiseStream::for_rows (a data-parallel process
//                            draws its shard's rows as the whole batch has them)
//   stacks_rows(attrs) (opt.) row i of the output depends on row i of input 0 and on the
//                            other inputs alone (a matrix product x·W): the tape computes
//                            nodes of this op that read the same other inputs (a layer of
//                            a parent and its children, which share their weights) as one
//                            call over their stacked rows (autodiff/tape.h,
//                            CompileOptions::stack). For ops with a cost per call worth
//                            sharing: the matrix products. Such ops keep no scratch
//   kLeaf            (opt.)  input / parameter / constant: the tape fills its value
//   infer(ctx)               shape and type inference; ctx.fail() names the node
//   scratch(ctx, out)(opt.)  elements of scratch memory kept from forward to backward
//   forward<T>(args)         computes args.out from args.in
//   backward<T>(args)        ADDS the vector-Jacobian product into args.gin[i], for each
//                            input whose gin[i] is non-null
//   check(builder)           its gradient-check cases (finite differences, double)
//
// define_op<Op>() turns such a struct into an OpDef, instantiating the kernels for float
// (training) and double (gradient checks). Registration is explicit: each ops/defs file
// has a register_*_ops(OpRegistry&) function listing its ops.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pens/ops/ir/attributes.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/ir/node.h"
#include "pens/ops/ir/value.h"
#include "pens/ops/precision.h"
#include "pens/ops/random.h"
#include "pens/ops/tensor.h"

namespace pens {

class CheckBuilder;

struct InputSlot {
  std::string name;
  DType dtype = DType::Real;
  bool differentiable = true;
};

// What shape inference sees: the node and the values of its inputs; and, for an op's
// scratch size, the precision its products will run in.
class InferCtx {
 public:
  InferCtx(const Node& node, std::span<const ValueInfo> in, Precision precision = Precision::Float32)
      : node(node), in(in), precision(precision) {}

  const Node& node;
  std::span<const ValueInfo> in;
  Precision precision;
  const Attributes& attrs() const { return node.attrs; }

  [[noreturn]] void fail(const std::string& message) const;
  // Reads an axis attribute, resolving negative values against `rank`.
  int axis(std::string_view attr, int rank) const;
};

// What a kernel sees. Forward reads `in` and writes `out` (and may fill `scratch`);
// backward reads everything and accumulates into the non-null entries of `gin`.
template <class T>
struct KernelArgs {
  std::span<const TensorView<const T>> in;
  TensorView<T> out;
  TensorView<T> scratch;
  std::span<const TensorView<T>> gin;
  TensorView<const T> gout;
  const Attributes* attrs = nullptr;
  const std::string* node_name = nullptr;
  NoiseStream noise;
  // The precision of the tape's matrix products (matmul and affine read it).
  Precision precision = Precision::Float32;

  const Attributes& attr() const { return *attrs; }
  // Errors found while running (a label out of range) name the node.
  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    pens::fail("node '", *node_name, "': ", args...);
  }
};

template <class T>
struct Kernels {
  void (*forward)(const KernelArgs<T>&) = nullptr;
  void (*backward)(const KernelArgs<T>&) = nullptr;
};

struct OpDef {
  std::string name;
  std::string summary;
  std::vector<InputSlot> inputs;
  bool variadic = false;
  std::vector<AttrSpec> attrs;
  bool stochastic = false;
  bool row_wise = false;
  bool leaf = false;
  bool (*stacks_rows)(const Attributes&) = nullptr;  // null: never stacked
  ValueInfo (*infer)(const InferCtx&) = nullptr;
  int64_t (*scratch)(const InferCtx&, const ValueInfo&) = nullptr;
  Kernels<float> f32;
  Kernels<double> f64;
  void (*check)(CheckBuilder&) = nullptr;

  template <class T>
  const Kernels<T>& kernels() const {
    if constexpr (std::is_same_v<T, float>) {
      return f32;
    } else {
      return f64;
    }
  }

  // The slot that input number i feeds (the last slot repeats for variadic ops).
  const InputSlot& slot(size_t i) const;
  bool differentiable(size_t i) const { return slot(i).differentiable; }
  // Throws an Error naming `node` unless n inputs fit this op.
  void check_arity(const Node& node, size_t n) const;
  // Checks attributes against the schema and fills in defaults.
  void normalize_attrs(Attributes& attrs, std::string_view node_name) const;
  std::string arity_str() const;  // "2", "1+" for variadic
};

template <class Op>
OpDef define_op() {
  OpDef d;
  d.name = Op::kName;
  d.summary = Op::kSummary;
  d.inputs = Op::inputs();
  if constexpr (requires { Op::attrs(); }) d.attrs = Op::attrs();
  if constexpr (requires { Op::kVariadic; }) d.variadic = Op::kVariadic;
  if constexpr (requires { Op::kStochastic; }) d.stochastic = Op::kStochastic;
  if constexpr (requires { Op::kRowWise; }) d.row_wise = Op::kRowWise;
  if constexpr (requires { Op::kLeaf; }) d.leaf = Op::kLeaf;
  if constexpr (requires { &Op::stacks_rows; }) d.stacks_rows = &Op::stacks_rows;
  d.infer = &Op::infer;
  if constexpr (requires { &Op::scratch; }) d.scratch = &Op::scratch;
  if constexpr (!requires { Op::kLeaf; }) {
    d.f32 = {&Op::template forward<float>, &Op::template backward<float>};
    d.f64 = {&Op::template forward<double>, &Op::template backward<double>};
  }
  d.check = &Op::check;
  return d;
}

// An axis attribute that shape inference already checked, made non-negative.
inline int resolve_axis(int64_t axis, int rank) {
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Small helpers shared by shape inference functions.
namespace infer {
// The input must be real-valued with the given rank (-1: any rank).
void expect(const InferCtx& ctx, size_t input, int rank);
// numpy broadcasting of two shapes (aligned on the right).
Shape broadcast(const InferCtx& ctx, const Shape& a, const Shape& b);
}  // namespace infer

}  // namespace pens
