#include "ops/op.h"

#include <algorithm>

namespace pens {

void InferCtx::fail(const std::string& message) const {
  pens::fail("node '", node.name, "' (", node.op ? node.op->name : "?", "): ", message);
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
    pens::fail("node '", node.name, "' (", name, "): expected ",
               variadic ? "at least " : "", inputs.size(), " input",
               inputs.size() == 1 ? "" : "s", ", got ", n);
  }
}

void OpDef::normalize_attrs(Attributes& attrs, std::string_view node_name) const {
  for (const auto& [key, value] : attrs.items()) {
    auto spec = std::find_if(this->attrs.begin(), this->attrs.end(),
                             [&](const AttrSpec& s) { return s.name == key; });
    if (spec == this->attrs.end()) {
      pens::fail("node '", node_name, "' (", name, "): unknown attribute '", key, "'");
    }
    AttrType got = attr_type_of(value);
    bool ok = got == spec->type || (spec->type == AttrType::Float && got == AttrType::Int) ||
              (spec->type == AttrType::Floats && got == AttrType::Ints) ||
              // An empty list parses as either kind of list.
              (spec->type == AttrType::Ints && got == AttrType::Floats &&
               std::get<std::vector<double>>(value).empty());
    if (!ok) {
      pens::fail("node '", node_name, "' (", name, "): attribute '", key, "' should be ",
                 attr_type_name(spec->type), ", got ", attr_type_name(got));
    }
  }
  for (const AttrSpec& spec : this->attrs) {
    if (attrs.has(spec.name)) {
      // Store ints given for float attributes as floats: one representation per value.
      const AttrValue& v = *attrs.find(spec.name);
      if (spec.type == AttrType::Float && attr_type_of(v) == AttrType::Int) {
        attrs.set(spec.name, static_cast<double>(std::get<int64_t>(v)));
      } else if (spec.type == AttrType::Floats && attr_type_of(v) == AttrType::Ints) {
        attrs.set(spec.name, attrs.get_floats(spec.name));
      } else if (spec.type == AttrType::Ints && attr_type_of(v) == AttrType::Floats) {
        attrs.set(spec.name, std::vector<int64_t>{});
      }
      continue;
    }
    if (spec.required) {
      pens::fail("node '", node_name, "' (", name, "): missing required attribute '",
                 spec.name, "'");
    }
    if (auto* d = std::get_if<AttrValue>(&spec.default_value)) attrs.set(spec.name, *d);
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
