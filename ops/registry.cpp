#include "ops/registry.h"

#include "graph/error.h"

namespace pens {

const OpRegistry& OpRegistry::global() { return mutable_global(); }

OpRegistry& OpRegistry::mutable_global() {
  static OpRegistry registry = [] {
    OpRegistry r;
    register_leaf_ops(r);
    register_linear_ops(r);
    register_elementwise_ops(r);
    register_reduce_ops(r);
    register_rowwise_ops(r);
    register_shape_ops(r);
    register_bilinear_ops(r);
    register_loss_ops(r);
    register_noise_ops(r);
    return r;
  }();
  return registry;
}

void OpRegistry::add(OpDef def) {
  if (ops_.count(def.name)) fail("op '", def.name, "' registered twice");
  std::string name = def.name;
  ops_.emplace(std::move(name), std::make_unique<OpDef>(std::move(def)));
}

const OpDef* OpRegistry::find(std::string_view name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

const OpDef& OpRegistry::at(std::string_view name) const {
  const OpDef* op = find(name);
  if (!op) fail("unknown op '", name, "' (`pens ops` lists the known ones)");
  return *op;
}

std::vector<const OpDef*> OpRegistry::all() const {
  std::vector<const OpDef*> out;
  for (const auto& [name, op] : ops_) out.push_back(op.get());
  return out;
}

}  // namespace pens
