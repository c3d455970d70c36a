#include "pens/train/optim/transform.h"

#include <algorithm>

#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"

namespace pens {

L2Penalty::L2Penalty(const ParamStore<float>& params, std::map<std::string, double> lambdas)
    : lambdas_(std::move(lambdas)) {
  for (const auto& [name, lambda] : lambdas_) {
    if (!params.find(name)) fail("l2.", name, ": the model has no parameter '", name, "'");
  }
}

void L2Penalty::apply(ParamStore<float>& params, const OptimizerStep& /*at*/) {
  for (const auto& [name, lambda] : lambdas_) {
    if (lambda <= 0) continue;
    float* g = params.grad(name).data;
    const float* v = params.value(name).data;
    const auto l = static_cast<float>(lambda);
    parallel_ranges(params.at(name).shape.numel(), [&](int64_t begin, int64_t count) {
      for (int64_t i = begin; i < begin + count; ++i) g[i] += l * v[i];
    });
  }
}

HoldParameters::HoldParameters(std::vector<const ParamEntry*> parameters, double from, double until)
    : parameters_(std::move(parameters)), from_(from), until_(until) {}

void HoldParameters::apply(ParamStore<float>& params, const OptimizerStep& at) {
  if (!active(at)) return;
  for (const ParamEntry* p : parameters_) std::fill_n(params.grads().data() + p->offset, p->shape.numel(), 0.0f);
}

void HoldParameters::held(const OptimizerStep& at, std::vector<const ParamEntry*>& out) const {
  if (active(at)) out.insert(out.end(), parameters_.begin(), parameters_.end());
}

}  // namespace pens
