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

void HoldParameters::held(const OptimizerStep& at, std::vector<const ParamEntry*>& out) const {
  if (at.epoch >= from_ && at.epoch < until_) out.insert(out.end(), parameters_.begin(), parameters_.end());
}

GradientTransforms make_transforms(const std::vector<TransformSpec>& specs, const ParamStore<float>& params,
                                   const std::string& where) {
  GradientTransforms out;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TransformSpec& spec = specs[i];
    std::vector<const ParamEntry*> entries;
    for (const std::string& name : spec.params) {
      const ParamEntry* e = params.find(name);
      if (!e) fail(where, "[", i, "].params: the model has no parameter '", name, "'");
      entries.push_back(e);
    }
    if (spec.kind == "l2") {
      std::map<std::string, double> lambdas;
      for (const std::string& name : spec.params) lambdas[name] = spec.lambda;
      out.push_back(std::make_unique<L2Penalty>(params, std::move(lambdas)));
    } else if (spec.kind == "hold") {
      out.push_back(std::make_unique<HoldParameters>(std::move(entries), spec.from, spec.until));
    } else {
      fail(where, "[", i, "].kind: '", spec.kind, "' is not a transform (l2, hold)");
    }
  }
  return out;
}

}  // namespace pens
