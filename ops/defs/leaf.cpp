// Leaves: values the tape provides rather than computes. Inputs are fed by the caller
// each step, parameters live in a ParamStore shared by every tape of a model,
// constants are filled once at compile time.
#include "pens/ops/check_case.h"
#include "pens/ops/ir/suggest.h"
#include "pens/ops/registry.h"

namespace pens {

namespace {

Shape declared_shape(const InferCtx& ctx, bool allow_batch) {
  const auto& dims = ctx.attrs().get_ints("shape");
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    ctx.fail(cat("shape has rank ", dims.size(), ", the maximum is ", kMaxRank));
  }
  for (int64_t d : dims) {
    if (d == kBatch && allow_batch) continue;
    if (d < 1) ctx.fail(cat("shape dimension ", d, " must be at least 1"));
  }
  return Shape::from(dims);
}

DType declared_dtype(const InferCtx& ctx) {
  const std::string& t = ctx.attrs().get_string("dtype");
  if (t == "real") return DType::Real;
  if (t == "index") return DType::Index;
  ctx.fail(cat("dtype must be 'real' or 'index', got '", t, "'"));
}

AttrSpec shape_attr(const char* doc) { return {"shape", AttrType::Ints, true, {}, doc}; }
AttrSpec dtype_attr() {
  return {"dtype", AttrType::String, false, AttrValue(std::string("real")), "real | index"};
}

}  // namespace

struct Input {
  static constexpr const char* kName = "input";
  static constexpr const char* kSummary = "data fed each step; -1 in its shape is the batch";
  static constexpr bool kLeaf = true;
  static std::vector<InputSlot> inputs() { return {}; }
  static std::vector<AttrSpec> attrs() {
    return {shape_attr("dimensions; -1 marks the batch dimension"), dtype_attr()};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    return {declared_shape(ctx, true), declared_dtype(ctx)};
  }
  static void check(CheckBuilder& b) { b.check({}, {{"shape", std::vector<int64_t>{2, 3}}}); }
};

struct Parameter {
  static constexpr const char* kName = "parameter";
  static constexpr const char* kSummary = "trainable tensor, shared by every graph that names it";
  static constexpr bool kLeaf = true;
  static std::vector<InputSlot> inputs() { return {}; }
  static std::vector<AttrSpec> attrs() {
    return {shape_attr("dimensions (no batch dimension)"),
            {"init", AttrType::String, false, AttrValue(std::string("zeros")),
             "zeros | constant | normal | uniform"},
            {"value", AttrType::Float, false, {}, "init=constant: the value"},
            {"std", AttrType::Float, false, {}, "init=normal: standard deviation", AttrRange::at_least(0)},
            {"limit", AttrType::Float, false, {}, "init=uniform: values in [-limit, limit]", AttrRange::at_least(0)},
            {"diagonal", AttrType::Float, false, {}, "added to the main diagonal after init (a square matrix)"},
            {"max_norm", AttrType::Float, false, {},
             "optimizer constraint: L2 norm of each column (a unit's incoming weights)", AttrRange::above(0)}};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    const std::string& init = ctx.attrs().get_string("init");
    const char* needs = init == "constant" ? "value"
                        : init == "normal"  ? "std"
                        : init == "uniform" ? "limit"
                                            : nullptr;
    if (init != "zeros" && !needs) {
      ctx.fail(cat("unknown init '", init, "'", unknown_name_hint(init, {"zeros", "constant", "normal", "uniform"})));
    }
    if (needs && !ctx.attrs().has(needs)) {
      ctx.fail(cat("init '", init, "' needs the attribute '", needs, "'"));
    }
    const Shape shape = declared_shape(ctx, false);
    if (ctx.attrs().has("diagonal") && (shape.rank != 2 || shape[0] != shape[1])) {
      ctx.fail(cat("diagonal: a square matrix has a main diagonal, the shape is ", shape.str()));
    }
    return {shape, DType::Real};
  }
  static void check(CheckBuilder& b) { b.check({}, {{"shape", std::vector<int64_t>{3, 2}}}); }
};

struct Constant {
  static constexpr const char* kName = "constant";
  static constexpr const char* kSummary = "fixed tensor: one value repeated, or listed values";
  static constexpr bool kLeaf = true;
  static std::vector<InputSlot> inputs() { return {}; }
  static std::vector<AttrSpec> attrs() {
    return {shape_attr("dimensions; -1 marks the batch dimension (with 'value' only)"),
            dtype_attr(),
            {"value", AttrType::Float, false, AttrValue(0.0), "every element"},
            {"values", AttrType::Floats, false, {}, "all elements, row-major"}};
  }
  static ValueInfo infer(const InferCtx& ctx) {
    ValueInfo v{declared_shape(ctx, true), declared_dtype(ctx)};
    if (ctx.attrs().has("values")) {
      if (v.shape.has_batch()) ctx.fail("a constant with listed values cannot have a batch dimension");
      const auto values = ctx.attrs().get_floats("values");
      if (static_cast<int64_t>(values.size()) != v.shape.numel()) {
        ctx.fail(cat("'values' has ", values.size(), " elements, shape ", v.shape.str(),
                     " needs ", v.shape.numel()));
      }
      if (v.dtype == DType::Index) {
        for (double x : values) {
          if (x < 0 || x != static_cast<double>(static_cast<int64_t>(x))) {
            ctx.fail(cat("index constant holds ", x, ", not a non-negative integer"));
          }
        }
      }
    }
    return v;
  }
  // Nothing to differentiate: the check compares the value with the attribute.
  static void check(CheckBuilder& b) {
    b.check({}, {{"shape", std::vector<int64_t>{2, 2}},
                 {"values", std::vector<double>{1.0, -2.0, 0.5, 3.0}}});
  }
};

void register_leaf_ops(OpRegistry& r) {
  r.add<Input>();
  r.add<Parameter>();
  r.add<Constant>();
}

}  // namespace pens
