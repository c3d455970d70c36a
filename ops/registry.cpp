#include "pens/ops/registry.h"


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
    register_normalization_ops(r);
    return r;
  }();
  return registry;
}

}  // namespace pens
