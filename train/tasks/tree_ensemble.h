// PEA on trees without a graph per tree: a pseudo-ensemble's networks over one tree, each
// on a TreeTape of the cell perturbed once (perturb_cell), and a head tape over their
// scores that computes the agreement penalties as the penalty pass builds them.
//
// A tree's graph with penalties (TreeModel::training_tree) holds the clean parent, K
// children and the penalties between their taps of the scores, and had to be built,
// rewritten and compiled for every tree of every step. Here the networks share nothing
// but the parameters and the tree, so each runs on its own TreeTape (compiled once per
// row count and kept), and what ties them, the penalties over every node's scores, is a
// small graph of its own: inputs the networks' scores [nodes, classes], compiled per node
// count and kept. Backward runs the head first and hands each network the gradient of
// the penalties for its scores (TreeTape::backward's score_grads), which it adds to its
// own loss's.
//
// The objective is the one a tree's graph with penalties has: the loss on the network
// the spec names (the parent; child 1; the children's mean), plus each penalty's λ times
// its mean over the tree's nodes. The draws are the perturbed cell's (child k's nodes are
// "c<k>/...", so children draw apart), not those of a tree's graph perturbed after
// unrolling: other draws of the same noise.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pens/autodiff/tree_tape.h"
#include "pens/graph/pseudo_ensemble.h"

namespace pens {

class TreeEnsembleTape {
 public:
  // `cell`: the cell with its children (perturb_cell with spec.children); `parent`: the
  // cell's ports; `children[k - 1]`: child k's ports in it. Every penalty of `spec`
  // taps the scores port's node (parent.scores), which carries no noise of its own (its
  // children's values are then their taps). loss_scale multiplies the loss as a
  // TreeTape's. The store must outlive the tape.
  TreeEnsembleTape(const Graph& cell, const TreePorts& parent, const std::vector<TreePorts>& children,
                   const PseudoEnsembleSpec& spec, ParamStore<float>& params, double loss_scale);
  TreeEnsembleTape(const TreeEnsembleTape&) = delete;
  TreeEnsembleTape& operator=(const TreeEnsembleTape&) = delete;
  ~TreeEnsembleTape();

  // As TreeTape's; the labels reach the networks that carry the loss.
  void set_tree(const TreeShape& shape, std::span<const int32_t> words, std::span<const int32_t> labels);
  void set_noise_key(NoiseKey key);
  void add_param_gradients_to(std::span<float> grads);
  // The λ schedule's scale now: scheduled penalties weigh λ times it (train/optim/schedule.h).
  void set_lambda_scale(double scale);

  void forward();
  // The networks' losses plus the penalties.
  double objective() const { return objective_; }
  // The penalties alone (λ included), after forward().
  double penalty() const { return penalty_; }
  // Network k's TreeTape (0: the parent; k: child k), null when nothing reads it.
  const TreeTape* network(size_t k) const { return k < networks_.size() ? networks_[k].get() : nullptr; }
  void backward();
  std::string describe() const;

 private:
  struct Head {
    std::unique_ptr<Tape<float>> tape;
    std::vector<PenaltyHandle> penalties;
    std::vector<char> reads;  // by network: whether the penalties read its scores
  };
  Head& head(int64_t nodes);
  // The head's input for network k's scores: the scores node's name (the parent), "c<k>/" before it.
  std::string input_name(size_t k) const;

  PseudoEnsembleSpec spec_;
  ParamStore<float>& params_;
  std::string scores_;  // the scores port's node: the head's parent input, "c<k>/<it>" its children's
  std::vector<std::unique_ptr<TreeTape>> networks_;  // [0] the parent, [k] child k; null: not read
  std::vector<char> carries_loss_;                   // by network
  std::map<int64_t, Head> heads_;                    // by node count
  Head* head_ = nullptr;                             // the one forward() ran
  int64_t classes_ = 0, nodes_ = 0;
  double lambda_scale_ = 1.0;
  std::vector<int32_t> no_labels_;
  double objective_ = 0, penalty_ = 0;
};

}  // namespace pens
