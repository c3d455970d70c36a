// The training step: the one every training loop in pens runs (the trainer,
// pre-training, the examples, the benchmarks, the tests):
//
//   feed -> noise key -> forward -> finiteness check -> backward -> gradient hook
//        -> optimizer -> constraints
//
// A step runs one or more graphs over one parameter store: one batch graph, or one graph
// per sentence tree. Their gradients add up in the store (Tape::backward adds), then one
// update follows. Nothing here allocates once the objects exist.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/train/constraints.h"
#include "pens/train/optimizer.h"

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
};

class Step {
 public:
  // Writes the inputs of graph `index` of the step (its rows of the batch, its tree).
  using Feed = std::function<void(Tape<float>& tape, size_t index)>;
  // Sees the step's summed gradients before the optimizer does (a data-parallel run sums
  // them across processes here).
  using GradientHook = std::function<void(ParamStore<float>& params)>;

  // Draws are keyed {seed, step, graph's example, rank}. The store and the optimizer must
  // outlive the Step.
  Step(ParamStore<float>& params, Optimizer& optimizer, std::vector<std::unique_ptr<Constraint>> constraints = {},
       uint64_t seed = 0, uint64_t rank = 0);

  void set_gradient_hook(GradientHook hook) { hook_ = std::move(hook); }

  // One update, numbered update.step, with the schedule's learning rate and momentum.
  StepResult run(const OptimizerStep& update, std::span<const StepGraph> graphs, const Feed& feed);
  // The same for a step of one graph (example 0).
  StepResult run(const OptimizerStep& update, Tape<float>& tape, const Feed& feed);

 private:
  ParamStore<float>& params_;
  Optimizer& optimizer_;
  std::vector<std::unique_ptr<Constraint>> constraints_;
  uint64_t seed_;
  uint64_t rank_;
  GradientHook hook_;
};

}  // namespace pens
