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
           uint64_t seed)
    : params_(params), optimizer_(optimizer), constraints_(std::move(constraints)), seed_(seed) {}

void Step::apply_update(const OptimizerStep& update) {
  if (hook_) hook_(params_);
  optimizer_.step(update);
  for (const auto& c : constraints_) c->apply();
}

StepResult Step::run(const OptimizerStep& update, std::span<const StepGraph> graphs, const Feed& feed) {
  if (communicator_) {
    if (graphs.size() != 1) fail("a data-parallel step runs one graph per process, not ", graphs.size());
    return run_shard(update, graphs[0], feed);
  }
  StepResult result;
  params_.zero_grad();
  for (size_t i = 0; i < graphs.size(); ++i) {
    Tape<float>& tape = *graphs[i].tape;
    feed(tape, i);
    tape.set_noise_key({seed_, static_cast<uint64_t>(update.step), graphs[i].example});
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
  if (graphs.size() == 1) {
    totals_.resize(graphs[0].tape->loss_count());
    for (size_t i = 0; i < totals_.size(); ++i) totals_[i] = graphs[0].tape->loss_value(i);
    result.losses = totals_;
  }
  apply_update(update);
  return result;
}

StepResult Step::run_shard(const OptimizerStep& update, const StepGraph& graph, const Feed& feed) {
  Communicator& comm = *communicator_;
  Tape<float>& tape = *graph.tape;
  StepResult result;
  params_.zero_grad();
  // This process's forward pass; an error in it (a label out of range in its rows) is
  // held until every process has said how its pass went.
  std::string error;
  try {
    feed(tape, 0);
    tape.set_noise_key({seed_, static_cast<uint64_t>(update.step), graph.example});
    tape.forward();
  } catch (const Error& e) {
    error = e.what();
  }
  // Summed over the processes: the loss terms, the objective, then how many processes
  // had a non-finite objective and how many an error.
  const size_t terms = tape.loss_count();
  totals_.assign(terms + 3, 0.0);
  const bool finite = error.empty() && std::isfinite(static_cast<double>(tape.objective()));
  if (error.empty()) {
    for (size_t i = 0; i < terms; ++i) totals_[i] = tape.loss_value(i);
    totals_[terms] = tape.objective();
  }
  totals_[terms + 1] = error.empty() && !finite ? 1 : 0;
  totals_[terms + 2] = error.empty() ? 0 : 1;
  comm.sum(totals_);
  if (totals_[terms + 2] > 0) throw CollectiveError(comm.first_problem(error));
  if (totals_[terms + 1] > 0) {
    result.finite = false;
    result.problem = comm.first_problem(finite ? std::string() : describe_objective(tape));
    return result;
  }
  const double processes = comm.size();
  for (size_t i = 0; i <= terms; ++i) totals_[i] /= processes;
  result.objective = totals_[terms];
  result.losses = std::span<const double>(totals_).first(terms);

  // Each parameter's gradient is summed as soon as the backward pass has finished it.
  tape.set_gradient_ready([&comm](std::span<float> grad) {
    comm.start_sum(grad);
    comm.progress();
  });
  tape.backward();
  tape.set_gradient_ready({});
  comm.finish_sums();
  const auto scale = static_cast<float>(1.0 / processes);
  for (float& g : params_.grads()) g *= scale;
  apply_update(update);
  return result;
}

StepResult Step::run(const OptimizerStep& update, Tape<float>& tape, const Feed& feed) {
  const StepGraph one{&tape, 0};
  return run(update, {&one, 1}, feed);
}

}  // namespace pens
