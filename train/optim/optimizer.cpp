#include "pens/train/optim/optimizer.h"

#include <algorithm>

#include "pens/ops/ir/error.h"

namespace pens {

// The built-in kinds, one file each.
OptimizerKind sgd_optimizer();      // train/optim/sgd.cpp
OptimizerKind adagrad_optimizer();  // train/optim/adagrad.cpp
OptimizerKind adam_optimizer();     // train/optim/adam.cpp

template <>
std::vector<OptimizerKind> builtin_kinds<OptimizerKind>() {
  return {sgd_optimizer(), adagrad_optimizer(), adam_optimizer()};
}

void Optimizer::step_range(const OptimizerStep&, int64_t, int64_t) {
  fail("optimizer ", kind(), " updates the whole store at once: it has no update of a range");
}

void Optimizer::restart() {
  for (const StateBuffer& b : state()) std::ranges::fill(b.values, 0.0f);
}

std::unique_ptr<Optimizer> make_optimizer(std::string_view kind, ParamStore<float>& params, Attributes settings) {
  const OptimizerKind& k = OptimizerRegistry::global().at(kind);
  normalize_attrs(k.settings, settings, cat("optimizer ", k.name));
  return k.make(params, settings);
}

}  // namespace pens
