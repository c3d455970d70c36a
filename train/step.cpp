#include "pens/train/step.h"

#include <cmath>

#include "pens/ops/ir/error.h"

namespace pens {

namespace {

// "the objective is nan; loss/c1/loss = 0.51; pen/logits/tanh = nan"
std::string describe_objective(const Tape<float>& tape) {
  std::string out = cat("the objective is ", tape.objective());
  for (size_t i = 0; i < tape.loss_count(); ++i) out += cat("; ", tape.loss_name(i), " = ", tape.loss_value(i));
  if (const std::string node = tape.first_non_finite(); !node.empty()) out += "; the first non-finite value is at " + node;
  return out;
}

}  // namespace

Step::Step(ParamStore<float>& params, Optimizer& optimizer, std::vector<std::unique_ptr<Constraint>> constraints,
           uint64_t seed, uint64_t rank)
    : params_(params), optimizer_(optimizer), constraints_(std::move(constraints)), seed_(seed), rank_(rank) {}

StepResult Step::run(const OptimizerStep& update, std::span<const StepGraph> graphs, const Feed& feed) {
  StepResult result;
  params_.zero_grad();
  for (size_t i = 0; i < graphs.size(); ++i) {
    Tape<float>& tape = *graphs[i].tape;
    feed(tape, i);
    tape.set_noise_key({seed_, static_cast<uint64_t>(update.step), graphs[i].example, rank_});
    tape.forward();
    const double objective = tape.objective();
    if (!std::isfinite(objective)) {
      result.finite = false;
      result.problem = describe_objective(tape);
      if (graphs.size() > 1) result.problem += cat(" (graph ", i, ", example ", graphs[i].example, ")");
      return result;
    }
    result.objective += objective;
    tape.backward();
  }
  if (hook_) hook_(params_);
  optimizer_.step(update);
  for (const auto& c : constraints_) c->apply();
  return result;
}

StepResult Step::run(const OptimizerStep& update, Tape<float>& tape, const Feed& feed) {
  const StepGraph one{&tape, 0};
  return run(update, {&one, 1}, feed);
}

}  // namespace pens
