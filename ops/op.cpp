#include "pens/ops/op.h"

#include <algorithm>

namespace pens {

void InferCtx::fail(const std::string& message) const {
  fail_at(node.name, "node '", node.name, "' (", node.op ? node.op->name : "?", "): ", message);
}

int InferCtx::axis(std::string_view attr, int rank) const {
  int64_t a = node.attrs.get_int(attr);
  if (a < -rank || a >= rank) {
    fail(cat("axis ", a, " is out of range for rank ", rank));
  }
  return static_cast<int>(a < 0 ? a + rank : a);
}

const InputSlot& OpDef::slot(size_t i) const {
  if (variadic && i >= inputs.size()) return inputs.back();
  return inputs.at(i);
}

std::string OpDef::arity_str() const {
  return variadic ? cat(inputs.size(), "+") : std::to_string(inputs.size());
}

void OpDef::check_arity(const Node& node, size_t n) const {
  const bool ok = variadic ? n >= inputs.size() : n == inputs.size();
  if (!ok) {
    fail_at(node.name, "node '", node.name, "' (", name, "): expected ",
               variadic ? "at least " : "", inputs.size(), " input",
               inputs.size() == 1 ? "" : "s", ", got ", n);
  }
}

void OpDef::normalize_attrs(Attributes& attrs, std::string_view node_name) const {
  try {
    pens::normalize_attrs(this->attrs, attrs, [&] { return cat("node '", node_name, "' (", name, ")"); });
  } catch (const Error& e) {
    throw Error(e.what(), std::string(node_name));
  }
}

namespace infer {

void expect(const InferCtx& ctx, size_t input, int rank) {
  const ValueInfo& v = ctx.in[input];
  const std::string& slot = ctx.node.op->slot(input).name;
  if (v.dtype != ctx.node.op->slot(input).dtype) {
    ctx.fail(cat("input '", slot, "' should be ", dtype_name(ctx.node.op->slot(input).dtype),
                 ", got ", dtype_name(v.dtype)));
  }
  if (rank >= 0 && v.shape.rank != rank) {
    ctx.fail(cat("input '", slot, "' should have rank ", rank, ", got shape ", v.shape.str()));
  }
}

Shape broadcast(const InferCtx& ctx, const Shape& a, const Shape& b) {
  Shape out;
  out.rank = std::max(a.rank, b.rank);
  for (int i = 0; i < out.rank; ++i) {
    // Align on the right: dimension i of the output pairs with these dimensions.
    int ia = i - (out.rank - a.rank), ib = i - (out.rank - b.rank);
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      ctx.fail(cat("shapes ", a.str(), " and ", b.str(), " do not broadcast"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace infer

}  // namespace pens
