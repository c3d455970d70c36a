// A tree cell run over one tree at a time, level by level, on tapes compiled once and
// reused by every tree: the dynamic structure of a sentence meets the static tape here.
//
// unroll_tree (graph/tree.h) makes a graph per tree, and a model whose parameters differ
// from tree to tree (fuzzing, subspace sampling) needs one per tree per step: building,
// passing and compiling it cost as much as computing it. A TreeTape instead splits the
// cell once into
//   - the shared part: what depends on no port (a parameter's noise, a subspace's slice
//     of a parameter), one tape, run once per tree, as the unrolled graph computes it once;
//   - one subgraph per port (leaf, compose, scores), compiled for each row count it meets
//     (the port's input dimension kBatch bound to a level's width) and kept; the leaf
//     port, run once per tree, computes what it reads itself, and looks the word vectors
//     up before their noise (LookupFirst), so that a fuzzed table costs the tree's rows;
//   - the loss over the labeled nodes' scores, compiled per labeled count and kept;
// and runs a tree's levels on them in order: the leaves, the internal nodes of height 1,
// 2, ... (children gathered from the rows below), the scores of every node. The shared
// part's values are read in place by the port tapes, whose gradients for them add into
// one array per value; backward runs the levels in reverse, scattering each level's input
// gradients into its children's rows, and ends with one pass over the shared part.
//
// Values and draws are the unrolled graph's: the rows are ordered as unroll_tree orders
// them, and each port tape draws with the stream salt of the instance it stands for
// (Tape::set_stream_salt). Gradients agree up to the order of float sums.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/graph/tree.h"

namespace pens {

class TreeTape {
 public:
  // `cell`: a tree cell (graph/tree.h), perturbed or not, checked against `ports`.
  // loss_scale multiplies the summed cross-entropy of the labeled nodes. The store must
  // outlive the TreeTape. A forward_only tape (evaluation) keeps no gradient memory and
  // one compose tape per level width, however often a tree meets the width: backward()
  // refuses. `precision` is the port tapes' products' (ops/precision.h).
  TreeTape(const Graph& cell, const TreePorts& ports, ParamStore<float>& params, double loss_scale,
           bool forward_only = false, Precision precision = Precision::Float32);
  TreeTape(const TreeTape&) = delete;
  TreeTape& operator=(const TreeTape&) = delete;
  ~TreeTape();

  // The tree the next forward() runs: its shape, each node's word id (leaves; others
  // ignored) and class (-1: no label; a tree without any has objective 0).
  void set_tree(const TreeShape& shape, std::span<const int32_t> words, std::span<const int32_t> labels);
  void set_noise_key(NoiseKey key) { key_ = key; }
  // Parameter gradients go into `grads` (laid out as the store's) instead of the store.
  void add_param_gradients_to(std::span<float> grads) { grads_ = grads; }

  void forward();
  double objective() const { return objective_; }
  // The scores of the tree's nodes after forward(): [nodes, classes], row r of node
  // row_of()[node], as unroll_tree numbers rows.
  std::span<const float> scores() const { return scores_; }
  const std::vector<int32_t>& row_of() const { return row_of_; }
  // The scores port's width: the classes.
  int64_t classes() const { return classes_; }
  // Adds the gradients of objective() into the parameter gradients; `score_grads`, when
  // given ([nodes, classes], rows as scores()), is a gradient for the scores from beyond
  // the tape (a penalty between networks, train/tasks/tree_ensemble.h), added to the loss's.
  void backward(std::span<const float> score_grads = {});
  // After a non-finite objective: the objective and the first non-finite value's place.
  std::string describe() const;

 private:
  struct Port;
  Tape<float>& port_tape(Port& port, int64_t rows, size_t use);
  Tape<float>& loss_tape(int64_t labeled);
  void use(Tape<float>& tape, uint64_t salt);
  // Port::Deferred: found when the compose port is built, added after its levels' backward.
  void defer_weight_gradients(Port& port);
  void add_deferred_weight_gradients();

  ParamStore<float>& params_;
  double loss_scale_;
  bool forward_only_;
  Precision precision_;
  std::string words_port_;
  int64_t dim_ = 0, classes_ = 0;
  std::unique_ptr<Tape<float>> shared_;  // null when nothing depends on parameters alone
  std::vector<std::string> shared_names_;  // the shared values the ports read
  std::vector<std::vector<float>> shared_grads_;  // their gradients, summed over the ports
  // Shared values whose gradient goes straight into a parameter's: fuzzed value -> parameter.
  std::map<std::string, std::string> gradient_into_param_;
  std::unique_ptr<Port> leaf_, compose_, scores_port_;
  std::map<int64_t, std::unique_ptr<Tape<float>>> losses_;  // by labeled count
  std::span<float> grads_;
  NoiseKey key_;

  // The tree.
  TreeShape shape_;
  std::vector<int32_t> row_of_;
  std::vector<std::vector<int32_t>> levels_;  // nodes by height
  std::vector<float> words_;                  // leaf word ids in row order
  std::vector<float> labels_, labeled_rows_;  // labeled nodes' classes and rows, row order
  // Values and gradients of every node's vector, [nodes, n], rows as row_of_.
  std::vector<float> vectors_, vector_grads_, scores_, score_grads_;
  std::vector<Tape<float>*> level_tapes_;  // the tapes forward() ran, by height
  std::vector<float> v1_rows_, v2_rows_, dy_rows_, outer_rows_;  // add_deferred_weight_gradients' scratch
  Tape<float>* scores_tape_ = nullptr;
  Tape<float>* loss_ = nullptr;
  double objective_ = 0;
};

}  // namespace pens
