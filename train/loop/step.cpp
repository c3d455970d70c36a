#include "pens/train/loop/step.h"

#include <algorithm>
#include <cmath>

#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"

namespace pens {

namespace {

// Adds `g` into a sum taken in the order of a complete binary tree over the vectors
// pushed: ((g0 + g1) + (g2 + g3)) + ... `levels` holds the pending partial sums (reused
// from step to step), `level_of` the tree level of each; after 2^k pushes the sum is
// levels[0].
void push_pairwise(std::vector<std::vector<float>>& levels, std::vector<int>& level_of, std::span<const float> g) {
  size_t slot = level_of.size();
  if (levels.size() <= slot) levels.emplace_back();
  levels[slot].assign(g.begin(), g.end());
  int level = 0;
  while (slot > 0 && level_of.back() == level) {
    std::vector<float>& left = levels[slot - 1];
    const std::vector<float>& right = levels[slot];
    for (size_t i = 0; i < left.size(); ++i) left[i] += right[i];
    level_of.pop_back();
    --slot;
    ++level;
  }
  level_of.push_back(level);
}

}  // namespace

std::string describe_objective(const Tape<float>& tape) {
  std::string out = cat("the objective is ", tape.objective());
  for (size_t i = 0; i < tape.loss_count(); ++i) out += cat("; ", tape.loss_name(i), " = ", tape.loss_value(i));
  if (const std::string node = tape.first_non_finite(); !node.empty()) out += "; the first non-finite value is at " + node;
  return out;
}

Step::Step(ParamStore<float>& params, Optimizer& optimizer, std::vector<std::unique_ptr<Constraint>> constraints,
           uint64_t seed)
    : params_(params), optimizer_(optimizer), constraints_(std::move(constraints)), seed_(seed) {}

void Step::apply_update(const OptimizerStep& update, std::span<const StepGraph> graphs) {
  held_.clear();
  for (const auto& t : transforms_) {
    t->apply(params_, update);
    t->held(update, held_);
  }
  for (const ParamEntry* p : held_) std::fill_n(params_.grads().data() + p->offset, p->shape.numel(), 0.0f);
  update_and_constrain(optimizer_, update, constraints_, held_);
  // Once each: the graphs share the store (a batch statistic's average follows the first
  // graph that computes it).
  moved_averages_.clear();
  for (const StepGraph& graph : graphs) graph.tape->update_averages(&moved_averages_);
}

void Step::refuse_batch_averages(const Tape<float>& tape, const char* step) {
  if (tape.averages_batch_values()) {
    fail("the graph keeps moving averages of batch statistics (batch normalisation's running statistics), which a ",
         step, " step would compute on each shard's rows alone: not supported");
  }
}

bool Step::agree(StepResult& result, Communicator* comm, const std::string& error, const std::string& problem,
                 double parts) {
  // The last two entries count the processes that had a non-finite objective and those
  // that had an error.
  const size_t terms = totals_.size() - 3;
  totals_[terms + 1] = problem.empty() ? 0 : 1;
  totals_[terms + 2] = error.empty() ? 0 : 1;
  if (comm) comm->sum(totals_);
  if (totals_[terms + 2] > 0) {
    if (!comm) throw Error(error);
    throw CollectiveError(comm->first_problem(error));
  }
  if (totals_[terms + 1] > 0) {
    result.finite = false;
    result.problem = comm ? comm->first_problem(problem) : problem;
    return false;
  }
  for (size_t i = 0; i <= terms; ++i) totals_[i] /= parts;
  result.objective = totals_[terms];
  result.losses = std::span<const double>(totals_).first(terms);
  return true;
}

StepResult Step::run(const OptimizerStep& update, std::span<const StepGraph> graphs, const Feed& feed) {
  if (communicator_) {
    if (graphs.size() != 1) fail("a data-parallel step runs one graph per process, not ", graphs.size());
    return run_data_parallel(update, graphs[0], feed);
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
  apply_update(update, graphs);
  return result;
}

StepResult Step::run_data_parallel(const OptimizerStep& update, const StepGraph& graph, const Feed& feed) {
  Communicator& comm = *communicator_;
  Tape<float>& tape = *graph.tape;
  refuse_batch_averages(tape, "data-parallel");
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
  const size_t terms = tape.loss_count();
  totals_.assign(terms + 3, 0.0);
  std::string problem;
  if (error.empty()) {
    for (size_t i = 0; i < terms; ++i) totals_[i] = tape.loss_value(i);
    totals_[terms] = tape.objective();
    if (!std::isfinite(totals_[terms])) problem = describe_objective(tape);
  }
  const double processes = comm.size();
  if (!agree(result, &comm, error, problem, processes)) return result;

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
  apply_update(update, {&graph, 1});
  return result;
}

StepResult Step::run(const OptimizerStep& update, Tape<float>& tape, const Feed& feed) {
  const StepGraph one{&tape, 0};
  return run(update, {&one, 1}, feed);
}

StepResult Step::run_groups(const OptimizerStep& update, Groups& work) {
  Communicator* comm = communicator_ && communicator_->size() > 1 ? communicator_ : nullptr;
  const size_t groups = work.count();
  const size_t n = params_.grads().size();
  if (group_grads_.size() + 1 < groups) group_grads_.resize(groups - 1);
  for (size_t g = 1; g < groups; ++g) group_grads_[g - 1].resize(n);
  const auto grads_of = [&](size_t g) {
    return g == 0 ? params_.grads() : std::span<float>(group_grads_[g - 1]);
  };
  const auto row_span = [](std::span<float> grads, const SparseRows& s, int64_t row) {
    const int64_t width = s.param->shape.numel() / s.param->shape[0];
    return grads.subspan(static_cast<size_t>(s.param->offset + row * width), static_cast<size_t>(width));
  };
  // Each array but the store's is zero in the sparse parameters after a step that
  // finished (their rows are cleared after the sum): a group clears the rest before it
  // runs. After a step that stopped early, or when the sparse parameters change, it
  // clears everything.
  const bool sparse_clear = group_grads_zero_;
  group_grads_zero_ = false;
  const auto params_of = [](std::span<const SparseRows> sparse) {
    std::vector<const ParamEntry*> out;
    for (const SparseRows& s : sparse) out.push_back(s.param);
    std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    return out;
  };
  // [begin, end) ranges of the store's layout outside `sparse` (sorted by offset).
  const auto outside = [n](const std::vector<const ParamEntry*>& sparse) {
    std::vector<std::pair<int64_t, int64_t>> ranges;
    int64_t at = 0;
    for (const ParamEntry* e : sparse) {
      if (e->offset > at) ranges.emplace_back(at, e->offset);
      at = e->offset + e->shape.numel();
    }
    if (static_cast<int64_t>(n) > at) ranges.emplace_back(at, static_cast<int64_t>(n));
    return ranges;
  };
  struct Outcome {
    std::span<const SparseRows> sparse;
    double objective = 0;
    std::string problem, error;
  };
  std::vector<Outcome> outcomes(groups);
  // The store's array, group 0's, is cleared here on every thread rather than by group 0
  // alone, which would then finish last.
  params_.zero_grad();
  parallel_for(static_cast<int64_t>(groups), [&](int64_t chunk) {
    const auto g = static_cast<size_t>(chunk);
    Outcome& o = outcomes[g];
    const std::span<float> grads = grads_of(g);
    try {
      o.sparse = work.prepare(g);
      if (g > 0) {
        std::vector<const ParamEntry*> kept;
        if (sparse_clear && params_of(o.sparse) == sparse_params_) kept = sparse_params_;
        for (const auto& [begin, end] : outside(kept)) std::fill(grads.begin() + begin, grads.begin() + end, 0.0f);
      }
      for (size_t i = 0; i < work.graphs(g); ++i) {
        const double objective =
            work.forward(g, i, {seed_, static_cast<uint64_t>(update.step), work.example(g, i)}, grads);
        if (!std::isfinite(objective)) {
          o.problem = cat(work.describe(g, i), " (group ", g, ", graph ", i, ", example ", work.example(g, i), ")");
          return;
        }
        o.objective += objective;
        work.backward(g, i);
      }
    } catch (const Error& e) {
      o.error = e.what();
    }
  });
  // The first group's error or non-finite objective, in group order; the processes of a
  // data-parallel step learn of any process's (agree) and all stop together.
  StepResult result;
  std::string error, problem;
  double objective = 0;
  for (const Outcome& o : outcomes) {
    if (error.empty()) error = o.error;
    if (problem.empty()) problem = o.problem;
    objective += o.objective;
  }
  totals_.assign(3, 0.0);
  totals_[0] = objective;
  // Each tree's loss is already scaled by the step's tree count: the processes' objectives
  // and gradients add up (one part).
  if (!agree(result, comm, error, problem, 1.0)) return result;
  // The sum in group order, ((g0 + g1) + g2) + ...: the dense parts by element blocks on
  // the pool, then each sparse row (its groups in the same order).
  sparse_params_ = groups > 1 ? params_of(outcomes[1].sparse) : std::vector<const ParamEntry*>{};
  for (size_t g = 2; g < groups; ++g) {
    if (params_of(outcomes[g].sparse) != sparse_params_) {
      fail("a grouped step's groups name different sparse parameters (group 1 and group ", g, ")");
    }
  }
  const std::vector<std::pair<int64_t, int64_t>> dense = outside(sparse_params_);
  constexpr int64_t kBlock = 16384;
  std::vector<std::pair<int64_t, int64_t>> blocks;
  for (const auto& [begin, end] : dense) {
    for (int64_t b = begin; b < end; b += kBlock) blocks.emplace_back(b, std::min(end, b + kBlock));
  }
  float* total = params_.grads().data();
  parallel_for(static_cast<int64_t>(blocks.size()), [&](int64_t k) {
    const auto [begin, end] = blocks[static_cast<size_t>(k)];
    for (size_t g = 1; g < groups; ++g) {
      const float* from = grads_of(g).data();
      for (int64_t i = begin; i < end; ++i) total[i] += from[i];
    }
  });
  for (size_t g = 1; g < groups; ++g) {
    for (const SparseRows& s : outcomes[g].sparse) {
      for (int64_t row : s.rows) {
        const std::span<float> from = row_span(grads_of(g), s, row), to = row_span(params_.grads(), s, row);
        for (size_t i = 0; i < from.size(); ++i) to[i] += from[i];
        std::fill(from.begin(), from.end(), 0.0f);
      }
    }
  }
  group_grads_zero_ = true;
  if (comm) {
    comm->start_sum(params_.grads());
    comm->finish_sums();
  }
  apply_update(update, {});
  work.update_averages();
  return result;
}

StepResult Step::run_shards(const OptimizerStep& update, Tape<float>& tape, int64_t shards, int64_t first,
                            int64_t count, const Feed& feed) {
  const bool power_of_two = shards > 0 && (shards & (shards - 1)) == 0 && count > 0 && (count & (count - 1)) == 0;
  if (!power_of_two || first < 0 || first + count > shards || first % count != 0) {
    fail("a sharded step computes a power of two of shards, a whole subtree of a power of two; got shards ", first,
         "..", first + count - 1, " of ", shards);
  }
  refuse_batch_averages(tape, "sharded");
  StepResult result;
  const size_t terms = tape.loss_count();
  totals_.assign(terms + 3, 0.0);
  level_of_.clear();
  // This process's shards, each gradient on its own, summed pairwise. A shard that fails
  // ends the process's work; the others learn of it below.
  std::string error, problem;
  for (int64_t k = first; k < first + count; ++k) {
    params_.zero_grad();
    try {
      feed(tape, static_cast<size_t>(k));
      tape.set_noise_key({seed_, static_cast<uint64_t>(update.step), 0});
      tape.forward();
    } catch (const Error& e) {
      error = cat(e.what(), " (shard ", k, ")");
      break;
    }
    if (!std::isfinite(static_cast<double>(tape.objective()))) {
      problem = cat(describe_objective(tape), " (shard ", k, ")");
      break;
    }
    for (size_t i = 0; i < terms; ++i) totals_[i] += tape.loss_value(i);
    totals_[terms] += tape.objective();
    tape.backward();
    push_pairwise(levels_, level_of_, params_.grads());
  }
  Communicator* comm = communicator_ && communicator_->size() > 1 ? communicator_ : nullptr;
  if (!agree(result, comm, error, problem, static_cast<double>(shards))) return result;

  // The processes' partial sums (whole subtrees, in process order) complete the tree.
  if (comm) {
    const size_t n = params_.grads().size();
    gathered_.resize(n * static_cast<size_t>(comm->size()));
    comm->gather(levels_[0], gathered_);
    level_of_.clear();
    for (int r = 0; r < comm->size(); ++r) push_pairwise(levels_, level_of_, std::span<const float>(gathered_).subspan(r * n, n));
  }
  const auto scale = static_cast<float>(1.0 / static_cast<double>(shards));
  std::span<float> grads = params_.grads();
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = levels_[0][i] * scale;
  const StepGraph graph{&tape, 0};
  apply_update(update, {&graph, 1});
  return result;
}

}  // namespace pens
