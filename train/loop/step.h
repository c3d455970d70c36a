// The training step: the one every training loop in pens runs (the trainer,
// pre-training, the examples, the benchmarks, the tests):
//
//   feed -> noise key -> forward -> finiteness check -> backward -> gradient transforms
//        -> optimizer -> constraints -> moving averages (Tape::update_averages)
//
// In a data-parallel run (set_communicator) the step's graph computes this process's
// shard of a global batch: the processes agree on the objective after the forward pass
// (a NaN or an error on one stops all of them at the same step), sum the parameters'
// gradients while the backward pass goes on, and divide by the number of processes. With
// every loss term a mean over its rows (or free of the batch), shards of equal size give
// the one-process gradient, up to the order of the sums.
//
// A step runs one or more graphs over one parameter store: one batch graph, or one graph
// per sentence tree. Their gradients add up in the store (Tape::backward adds), then one
// update follows. Nothing here allocates once the objects exist (but run_groups' small
// vectors of the groups' outcomes).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/train/dist/communicator.h"
#include "pens/train/optim/constraints.h"
#include "pens/train/optim/optimizer.h"
#include "pens/train/optim/transform.h"

namespace pens {

// One graph of a step, and the example index its noise is keyed by: a tree's index, or
// 0 for the step's one batch graph.
struct StepGraph {
  Tape<float>* tape = nullptr;
  uint64_t example = 0;
};

struct StepResult {
  bool finite = true;     // false: a graph's objective was NaN or infinite; no update was made
  double objective = 0;   // the sum of the graphs' objectives
  std::string problem;    // when not finite: the objective and every loss term, by name
  // The graphs' loss terms (Tape::loss_value) in a one-graph step; in a data-parallel
  // step, their means over the processes: the global batch's.
  std::span<const double> losses;
};

// "the objective is nan; loss/c1/loss = 0.51; pen/logits/tanh = nan": what a step that
// stopped at a non-finite objective reports.
std::string describe_objective(const Tape<float>& tape);

class Step {
 public:
  // Writes the inputs of graph `index` of the step (its rows of the batch, its tree).
  using Feed = std::function<void(Tape<float>& tape, size_t index)>;

  // Draws are keyed {seed, step, graph's example}. The store and the optimizer must
  // outlive the Step.
  Step(ParamStore<float>& params, Optimizer& optimizer, std::vector<std::unique_ptr<Constraint>> constraints = {},
       uint64_t seed = 0);

  // Appends a transform of the step's summed gradients (train/optim/transform.h), run in
  // the order added before the optimizer updates (a data-parallel run has summed the
  // gradients across processes by then). Parameters a transform holds still at an update
  // are skipped by the constraints too.
  void add_transform(std::unique_ptr<GradientTransform> transform) { transforms_.push_back(std::move(transform)); }
  // Makes the step data-parallel over `communicator`'s processes (null: one process). Its
  // steps then run one graph each, whose tape's rows are placed in the global batch
  // (Tape::set_row_placement). An error in one process's step is thrown on every process
  // as a CollectiveError.
  void set_communicator(Communicator* communicator) { communicator_ = communicator; }

  // One update, numbered update.step, with the schedule's learning rate and momentum.
  StepResult run(const OptimizerStep& update, std::span<const StepGraph> graphs, const Feed& feed);
  // The same for a step of one graph (example 0).
  StepResult run(const OptimizerStep& update, Tape<float>& tape, const Feed& feed);

  // One update over graphs computed in groups side by side on the pool's threads (a
  // step of sentence trees). Group g's work runs on one thread: prepare(g) (which may
  // build its graphs there), then its graphs forward and backward in order, keyed
  // {seed, step, example}, their parameter gradients added into the group's own array.
  // The groups' gradients are then summed in group order, ((g0 + g1) + g2) + ..., so the
  // update depends on the grouping, never on the thread count. An error in a group is
  // thrown (the first group's in order) once every group has finished.
  //
  // Data-parallel (set_communicator): each process runs its own groups (its share of the
  // step's graphs, whose objectives must already be scaled to add up to the step's); the
  // processes agree on errors and non-finite objectives as run() does, and sum their
  // gradients before the update. The sum across processes is taken in MPI's order: the
  // bits then differ from one process's by float round-off.
  //
  // A group may say that its graphs write some parameters' gradients at a few rows only
  // (an embedding table looked up by the group's words): then only those rows of its
  // array are summed and cleared, not the whole table.
  struct SparseRows {
    const ParamEntry* param = nullptr;
    std::span<const int64_t> rows;  // sorted, each once
  };
  class Groups {
   public:
    virtual ~Groups() = default;
    virtual size_t count() const = 0;
    // Readies group g on the thread that will run it; returns the sparse parameters'
    // rows its gradients may touch (every group names the same parameters).
    virtual std::span<const SparseRows> prepare(size_t g) = 0;
    virtual size_t graphs(size_t g) const = 0;
    virtual uint64_t example(size_t g, size_t i) const = 0;
    // Graph i of group g forward under `key`, its parameter gradients to go to `grads`
    // (a zeroed array laid out as the store's); returns its objective.
    virtual double forward(size_t g, size_t i, NoiseKey key, std::span<float> grads) = 0;
    virtual void backward(size_t g, size_t i) = 0;
    // After a forward pass whose objective is not finite: the objective and its terms.
    virtual std::string describe(size_t g, size_t i) const = 0;
    // After the update: the graphs' moving averages (Tape::update_averages).
    virtual void update_averages() = 0;
  };
  StepResult run_groups(const OptimizerStep& update, Groups& groups);

  // One update over a global batch computed as `shards` equal shards (a power of two),
  // this process computing shards first .. first + count - 1 on `tape` (feed(tape, k)
  // writes shard k's rows and places them in the global batch): each shard's gradient is
  // computed on its own, and the gradients are added in one fixed pairwise order over the
  // shards, across processes too (each gathers the others' partial sums), then averaged.
  // The update is then the same, bit for bit, whatever the number of processes sharing
  // the shards. The sums wait for the backward passes (no overlap).
  StepResult run_shards(const OptimizerStep& update, Tape<float>& tape, int64_t shards, int64_t first, int64_t count,
                        const Feed& feed);

 private:
  StepResult run_data_parallel(const OptimizerStep& update, const StepGraph& graph, const Feed& feed);
  // After this process's forward passes, totals_ holding its loss terms and objective
  // (and two places more): the processes (over `comm`, when not null) learn of any
  // process's error, thrown on all, and of any non-finite objective (`problem`), which
  // ends the step with no update (false); otherwise `result` gets the sums' means over
  // `parts`.
  bool agree(StepResult& result, Communicator* comm, const std::string& error, const std::string& problem,
             double parts);
  // Transforms, optimizer, constraints, then the moving averages of the step's graphs.
  void apply_update(const OptimizerStep& update, std::span<const StepGraph> graphs);
  static void refuse_batch_averages(const Tape<float>& tape, const char* step);

  ParamStore<float>& params_;
  Optimizer& optimizer_;
  std::vector<std::unique_ptr<Constraint>> constraints_;
  uint64_t seed_;
  GradientTransforms transforms_;
  Communicator* communicator_ = nullptr;
  std::vector<const ParamEntry*> held_;  // by the transforms, at the current update
  std::vector<const float*> moved_averages_;  // apply_update's, kept for its capacity
  std::vector<double> totals_;  // what the processes sum after the forward pass (agree)
  // The pairwise sum of run_shards: partial sums by level, and the processes' partial sums.
  std::vector<std::vector<float>> levels_;
  std::vector<int> level_of_;
  std::vector<float> gathered_;
  // run_groups: the gradients of groups 1, 2, ... (group 0 adds into the store's).
  std::vector<std::vector<float, Eigen::aligned_allocator<float>>> group_grads_;
  bool group_grads_zero_ = true;
  std::vector<const ParamEntry*> sparse_params_;  // the last step's sparse parameters, by offset
};

}  // namespace pens
