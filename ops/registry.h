// The table of ops. Registration is explicit: OpRegistry::global() calls one
// register_*_ops function per file of ops/defs/, and each of those lists its ops.
#pragma once

#include <string_view>
#include <vector>

#include "pens/ops/ir/named_table.h"
#include "pens/ops/op.h"

namespace pens {

class OpRegistry {
 public:
  static const OpRegistry& global();

  // Adds an op defined outside pens (a user's own op, written to the contract of
  // ops/op.h) to the global registry, so graphs can use it by name. Register before
  // building graphs; registration is not synchronized with concurrent lookups.
  template <class Op>
  static void register_global() {
    mutable_global().add(define_op<Op>());
  }

  void add(OpDef def) { ops_.add(std::move(def)); }  // throws on a duplicate name
  const OpDef* find(std::string_view name) const { return ops_.find(name); }
  const OpDef& at(std::string_view name) const { return ops_.at(name); }  // "unknown op 'x'"
  std::vector<const OpDef*> all() const { return ops_.all(); }            // sorted by name

  template <class Op>
  void add() {
    add(define_op<Op>());
  }

 private:
  static OpRegistry& mutable_global();
  NamedTable<OpDef> ops_{"op", "`pens ops` lists them"};
};

// One per file of ops/defs/.
void register_leaf_ops(OpRegistry& r);
void register_linear_ops(OpRegistry& r);
void register_elementwise_ops(OpRegistry& r);
void register_reduce_ops(OpRegistry& r);
void register_rowwise_ops(OpRegistry& r);
void register_shape_ops(OpRegistry& r);
void register_bilinear_ops(OpRegistry& r);
void register_loss_ops(OpRegistry& r);
void register_noise_ops(OpRegistry& r);
void register_normalization_ops(OpRegistry& r);

}  // namespace pens
