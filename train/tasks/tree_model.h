// A tree model at work: a model file's tree cell (graph/tree.h) and the sentences it runs
// on. One graph per tree: unrolled by height, then (for a model with noise) turned into its
// pseudo-ensemble, compiled into a tape over the model's one parameter store, fed the
// tree's words, labels and level gathers. The trainer, `pens eval`, the benchmark and the
// tests all go through here.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/autodiff/tree_tape.h"
#include "pens/graph/tree.h"
#include "pens/models/sst.h"
#include "pens/serialization/model.h"
#include "pens/train/loop/step.h"
#include "pens/train/tasks/tree_ensemble.h"

namespace pens {

struct TreeEvaluation {
  int64_t roots = 0, roots_right = 0;    // roots that carry a label for the task
  int64_t nodes = 0, nodes_right = 0;    // every labeled node
  std::vector<std::vector<int64_t>> confusion;  // roots: [true class][predicted class]
  double root_accuracy() const;
  double node_accuracy() const;
};

// The task a tree model's scores fit, for tools given only the model: 2 classes binary,
// otherwise fine.
SentimentTask task_of(const Model& model);

class TreeModel {
 public:
  // `model` must have a tree section, `classes` scores for the task. loss_scale multiplies
  // each tree's summed cross-entropy (1 / trees per step: the step's loss is their mean).
  // The model is kept by reference and must outlive this; its cell and pseudo-ensemble
  // are read here (the perturbed cell is built once), so changes to them afterwards need
  // a new TreeModel.
  TreeModel(const Model& model, SentimentTask task, double loss_scale = 1.0);

  SentimentTask task() const { return task_; }
  // The precision of the products of the TreeTapes made after this (ops/precision.h).
  void set_precision(Precision precision) { precision_ = precision; }
  // The model's tree cell (its parameters, noise annotations and moving averages).
  const Graph& cell() const { return model_.graph; }
  // Whether the model samples subspaces (then evaluation averages over draws).
  bool samples_subspaces() const { return subspace_; }
  // Whether a child's parameters differ from tree to tree (fuzzing, subspace sampling):
  // then each tree of a step needs its own graph. Otherwise a step's trees unroll into
  // one forest graph whose levels span them all (the same objective, wider products).
  bool per_tree_parameters() const { return per_tree_parameters_; }
  int64_t classes() const { return classes_; }
  // The parameters the cell reads only as rows picked by the words port (the word
  // vectors): a tree's gradient for them is zero outside its words' rows.
  const std::vector<std::string>& word_tables() const { return word_tables_; }

  // The parent graph of one tree with its loss over the task's labeled nodes; a tree
  // without one has no loss node.
  UnrolledTree unroll(const SentimentTree& tree) const;
  // The graph a training step runs for one tree (fed like the parent's): the unrolled
  // parent, or its pseudo-ensemble when the model declares one. A lone noisy child
  // without penalties is the unrolled perturbed cell: the perturb pass ran once, on the
  // cell, rather than on every tree's graph.
  UnrolledTree training_tree(const SentimentTree& tree) const;
  // Whether training_tree unrolls the perturbed cell.
  bool perturbs_cell() const { return training_cell_.has_value(); }
  // Whether training steps run trees on a TreeTape (a model without a pseudo-ensemble,
  // or one whose lone child perturbs_cell()) rather than on graphs built per step: the
  // same objective and gradients, without building.
  bool runs_tree_tapes() const { return training_cell_ || ensemble_cell_ || !model_.ensemble; }
  // Whether those TreeTapes are a TreeEnsembleTape's (penalties between the networks'
  // scores) rather than one.
  bool runs_tree_ensembles() const { return ensemble_cell_.has_value(); }
  // A TreeTape of the training cell (the perturbed one, or the model's), whose trees
  // set_tree_of() gives.
  std::unique_ptr<TreeTape> tree_tape(ParamStore<float>& params) const;
  // The networks and penalties of the model's pseudo-ensemble over a tree, when it
  // runs_tree_ensembles().
  std::unique_ptr<TreeEnsembleTape> ensemble_tape(ParamStore<float>& params) const;
  // Sets a tree on a TreeTape or TreeEnsembleTape: its shape, words and classes for the
  // task (`labels`: scratch); without `labeled`, no node's class, so forward() stops at
  // the scores.
  template <class Tapes>
  void set_tree_of(Tapes& tape, const SentimentTree& tree, std::vector<int32_t>& labels, bool labeled = true) const {
    labels_of(tree, labels, labeled);
    tape.set_tree(tree.shape, tree.word_id, labels);
  }
  // Writes a tree's words, level gathers and (with `labels`, for graphs that keep the
  // loss) labels into a tape of one of its graphs.
  void feed(Tape<float>& tape, const UnrolledTree& unrolled, const SentimentTree& tree, bool labels = true) const;

  // Root and all-node accuracy. Models that sample subspaces average the class
  // probabilities of `samples` sampled subspaces per tree (keys {seed, draw, tree}), on
  // TreeTapes of the sampling cell, with no other noise (no fuzz, no activation noise: the
  // paper's test time); others, and samples = 0, use the clean parent on forests of
  // `forest` trees.
  // fold_to_binary: a fine-grained model evaluated on the binary task (its non-neutral
  // labels), predicting positive where P(3) + P(4) > P(0) + P(1). `first_key`: the index
  // of trees[0] in the set it was taken from (a process's share of a set keys its draws
  // as the whole set does).
  TreeEvaluation evaluate(ParamStore<float>& params, std::span<const SentimentTree> trees, int64_t samples,
                          uint64_t seed, size_t forest = 64, bool fold_to_binary = false, size_t first_key = 0) const;

  // Subspace models: the graph of one sampled subspace for a tree, its output the class
  // probabilities ("tree/probabilities"); what a TreeTape of sampling_tape() computes
  // for the tree under the same key, built per tree (tests and inspection compare them).
  UnrolledTree sampling_tree(const SentimentTree& tree) const;
  // A forward-only TreeTape of the sampling cell (the cell with its subspace noise alone).
  std::unique_ptr<TreeTape> sampling_tape(ParamStore<float>& params) const;
  // The mean over draws 0 .. samples-1 (keys {seed, draw, example}) of a tree's class
  // probabilities on a sampling_tape(), into `probs` [nodes, classes] by node.
  void sampled_probabilities(TreeTape& tape, const SentimentTree& tree, int64_t samples, uint64_t seed,
                             uint64_t example, std::vector<double>& probs) const;

 private:
  const Model& model_;
  SentimentTask task_;
  double loss_scale_;
  Precision precision_ = Precision::Float32;
  bool subspace_ = false;
  bool per_tree_parameters_ = false;
  int64_t classes_ = 0;
  std::vector<std::string> word_tables_;
  std::optional<Graph> training_cell_;  // the cell and its perturbed child, when perturbs_cell()
  TreePorts training_ports_;            // the child's ports in it
  std::optional<Graph> ensemble_cell_;  // the cell and all its children, when runs_tree_ensembles()
  std::vector<TreePorts> ensemble_ports_;  // child k's ports in it at [k - 1]
  Graph inference_cell_;                // the clean parent: build_inference of the cell
  std::optional<Graph> sampling_cell_;  // the cell and a child with its subspace noise alone
  TreePorts sampling_ports_;
  // The TreeTapes evaluate() runs on, kept between calls on the same store.
  class TapePool;
  mutable std::shared_ptr<TapePool> inference_tapes_, sampling_tapes_;
  mutable std::mutex pools_mutex_;
  // The pool of `params`' tapes (`pool`, or a new one in its place for another store).
  std::shared_ptr<TapePool> tapes(std::shared_ptr<TapePool>& pool, ParamStore<float>& params,
                                  std::unique_ptr<TreeTape> (TreeModel::*make)(ParamStore<float>&) const) const;

  TreeLoss loss_of(const SentimentTree& tree) const;
  // A tree's classes for the task by node (-1 for all without `labeled`); checks its words have ids.
  void labels_of(const SentimentTree& tree, std::vector<int32_t>& labels, bool labeled) const;
  // A forward-only TreeTape of the inference cell (the clean parent).
  std::unique_ptr<TreeTape> inference_tape(ParamStore<float>& params) const;
  // evaluate()'s work on one forest of the clean parent, on `tape` (an inference_tape()),
  // counted into `e`.
  void evaluate_forest(TreeTape& tape, const std::vector<const SentimentTree*>& members, bool fold_to_binary,
                       TreeEvaluation& e) const;
  // evaluate()'s work with sampled subspaces: trees[i] keyed by first_key + i + 1.
  void evaluate_sampled(ParamStore<float>& params, std::span<const SentimentTree> trees, int64_t samples,
                        uint64_t seed, bool fold_to_binary, size_t first_key, TreeEvaluation& e) const;
  // Counts one tree's predictions into `e`: `scores` [nodes, classes] by node, class
  // probabilities when `probabilities`, else the parent's scores.
  void tally(const SentimentTree& tree, std::span<const double> scores, bool probabilities, bool fold_to_binary,
             TreeEvaluation& e) const;
};

// The graphs one training step runs over some trees, in groups computed side by side on
// the pool's threads (Step::run_groups): the step's trees are cut into `groups`
// consecutive runs of about equal node counts, and each group's work runs on one thread.
// The update depends on the grouping (the order of the gradient sums), never on the
// thread count. A group runs
//   - a tree, or a forest of its trees when parameters are not perturbed per tree, at a
//     time on its TreeTape, or its TreeEnsembleTape (penalties between the networks'
//     scores), when TreeModel::runs_tree_tapes (Table 2's four models, and PEA on them):
//     nothing is built per step;
//   - else (penalties on other nodes, a teacher, noise found from gradients) a graph per
//     tree, or a forest graph, built and compiled in the step.
// A tree is keyed by its example, a forest by its last tree's.
class TreeStepGraphs : public Step::Groups {
 public:
  // `examples[i]` keys tree i's noise. `lambda_scale`: the λ schedule's scale now (the
  // penalties it schedules get λ times it). `groups` >= 1 (fewer when there are fewer trees).
  void assign(const TreeModel& model, ParamStore<float>& params, const std::vector<const SentimentTree*>& trees,
              const std::vector<uint64_t>& examples, double lambda_scale, size_t groups);
  // One training step over the assigned trees.
  StepResult run(Step& step, const OptimizerStep& update) { return step.run_groups(update, *this); }

  // Step::Groups: prepare() builds a group's graphs (or readies its TreeTape) and names
  // the rows of the word tables its trees' words pick.
  size_t count() const override { return groups_.size(); }
  std::span<const Step::SparseRows> prepare(size_t g) override;
  size_t graphs(size_t g) const override;
  uint64_t example(size_t g, size_t i) const override;
  double forward(size_t g, size_t i, NoiseKey key, std::span<float> grads) override;
  void backward(size_t g, size_t i) override;
  std::string describe(size_t g, size_t i) const override;
  void update_averages() override;

 private:
  struct Group {
    size_t first = 0, count = 0;  // its trees
    std::vector<Forest> forests;
    std::vector<UnrolledTree> unrolled;
    std::vector<std::unique_ptr<Tape<float>>> tapes;
    std::vector<uint64_t> examples;    // by graph
    std::unique_ptr<TreeTape> trees;   // kept from step to step: its tapes are compiled once
    std::unique_ptr<TreeEnsembleTape> ensemble;  // in place of `trees` for penalties between networks
    std::vector<int32_t> labels;       // a tree's classes for the task, for the TreeTape
    std::vector<int64_t> words;  // the word ids of its trees' leaves, sorted, each once
    std::vector<Step::SparseRows> sparse;
  };
  const TreeModel* model_ = nullptr;
  ParamStore<float>* params_ = nullptr;
  std::vector<const SentimentTree*> trees_;
  std::vector<uint64_t> examples_;
  double lambda_scale_ = 1.0;
  std::vector<Group> groups_;

  static bool on_tree_tapes(const Group& group) { return group.trees || group.ensemble; }
};

}  // namespace pens
