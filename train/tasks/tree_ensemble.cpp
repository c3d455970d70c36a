#include "pens/train/tasks/tree_ensemble.h"

#include <algorithm>

#include "pens/graph/pass.h"
#include "pens/ops/ir/error.h"
#include "pens/train/optim/schedule.h"

namespace pens {

namespace {
std::string network_name(size_t k) { return k == 0 ? "the parent" : cat("child ", k); }
}  // namespace

std::string TreeEnsembleTape::input_name(size_t k) const { return k == 0 ? scores_ : cat("c", k, "/", scores_); }

TreeEnsembleTape::TreeEnsembleTape(const Graph& cell, const TreePorts& parent, const std::vector<TreePorts>& children,
                                   const PseudoEnsembleSpec& spec, ParamStore<float>& params, double loss_scale)
    : spec_(spec), params_(params), scores_(parent.scores) {
  spec_.validate();
  if (static_cast<int64_t>(children.size()) != spec_.children) {
    fail("TreeEnsembleTape: ", children.size(), " children's ports for a pseudo-ensemble of ", spec_.children);
  }
  for (const PenaltyTerm& term : spec_.penalties) {
    if (term.node != scores_ || !term.target.empty()) {
      fail("TreeEnsembleTape: penalty ", term.kind, " on '", term.node, "': on TreeTapes, penalties tap the scores port ('",
           scores_, "') and compare it with itself");
    }
  }
  const auto k_children = static_cast<size_t>(spec_.children);
  const bool penalized = !spec_.penalties.empty();
  const bool parent_paired = std::any_of(spec_.penalties.begin(), spec_.penalties.end(),
                                         [&](const PenaltyTerm& t) { return spec_.pairing_of(t) == "parent-child"; });
  // The networks something reads: the one the loss is on, and those the penalties pair.
  std::vector<char> read(k_children + 1, 0);
  carries_loss_.assign(k_children + 1, 0);
  if (spec_.loss_on == "parent") carries_loss_[0] = 1;
  if (spec_.loss_on == "child") carries_loss_[1] = 1;
  if (spec_.loss_on == "children") std::fill(carries_loss_.begin() + 1, carries_loss_.end(), 1);
  read[0] = carries_loss_[0] || parent_paired;
  for (size_t k = 1; k <= k_children; ++k) read[k] = carries_loss_[k] || penalized;
  // The children's mean loss (eq. 1 estimated over them), as the perturb pass scales it.
  const double child_scale = spec_.loss_on == "children" ? loss_scale / static_cast<double>(k_children) : loss_scale;
  networks_.resize(k_children + 1);
  for (size_t k = 0; k <= k_children; ++k) {
    if (!read[k]) continue;
    const TreePorts& ports = k == 0 ? parent : children[k - 1];
    networks_[k] = std::make_unique<TreeTape>(cell, ports, params_, k == 0 ? loss_scale : child_scale);
    classes_ = networks_[k]->classes();
  }
}

TreeEnsembleTape::~TreeEnsembleTape() = default;

void TreeEnsembleTape::set_tree(const TreeShape& shape, std::span<const int32_t> words,
                                std::span<const int32_t> labels) {
  no_labels_.assign(labels.size(), -1);
  for (size_t k = 0; k < networks_.size(); ++k) {
    if (networks_[k]) networks_[k]->set_tree(shape, words, carries_loss_[k] ? labels : no_labels_);
  }
  nodes_ = shape.size();
}

void TreeEnsembleTape::set_noise_key(NoiseKey key) {
  for (const auto& n : networks_) {
    if (n) n->set_noise_key(key);
  }
}

void TreeEnsembleTape::add_param_gradients_to(std::span<float> grads) {
  for (const auto& n : networks_) {
    if (n) n->add_param_gradients_to(grads);
  }
}

void TreeEnsembleTape::set_lambda_scale(double scale) {
  lambda_scale_ = scale;
  for (auto& [nodes, h] : heads_) set_penalty_weights(*h.tape, h.penalties, scale);
}

TreeEnsembleTape::Head& TreeEnsembleTape::head(int64_t nodes) {
  Head& h = heads_[nodes];
  if (h.tape) return h;
  // The penalty pass's own terms, between inputs that stand for the networks' scores: the
  // parent's under the scores node's name, child k's under its tap's.
  Perturbed p;
  p.graph.input(input_name(0), Shape{nodes, classes_});
  for (size_t k = 1; k < networks_.size(); ++k) {
    p.graph.input(input_name(k), Shape{nodes, classes_});
    p.taps.push_back({{scores_, input_name(k)}});
  }
  h.penalties = within_pass("tree ensemble head", [&] { return add_penalties(p, spec_, {}); });
  const Graph g = PruneDeadNodes().run(p.graph);
  std::vector<std::string> inputs;
  h.reads.assign(networks_.size(), 0);
  for (size_t k = 0; k < networks_.size(); ++k) {
    if (!g.find(input_name(k))) continue;
    if (!networks_[k]) fail("TreeEnsembleTape: the penalties read ", network_name(k), ", which has no tape");
    inputs.push_back(input_name(k));
    h.reads[k] = 1;
  }
  h.tape = std::make_unique<Tape<float>>(g, params_, CompileOptions{.grad_inputs_named = inputs});
  set_penalty_weights(*h.tape, h.penalties, lambda_scale_);
  return h;
}

void TreeEnsembleTape::forward() {
  objective_ = 0, penalty_ = 0;
  head_ = nullptr;
  for (const auto& n : networks_) {
    if (!n) continue;
    n->forward();
    objective_ += n->objective();
  }
  if (spec_.penalties.empty()) return;
  head_ = &head(nodes_);
  Tape<float>& tape = *head_->tape;
  for (size_t k = 0; k < networks_.size(); ++k) {
    if (!head_->reads[k]) continue;
    const std::span<const float> scores = networks_[k]->scores();
    std::copy(scores.begin(), scores.end(), tape.input(input_name(k)).data);
  }
  tape.forward();
  penalty_ = tape.objective();
  objective_ += penalty_;
}

void TreeEnsembleTape::backward() {
  if (head_) head_->tape->backward();
  for (size_t k = 0; k < networks_.size(); ++k) {
    if (!networks_[k]) continue;
    if (head_ && head_->reads[k]) {
      const TensorView<const float> d = head_->tape->grad(input_name(k));
      networks_[k]->backward({d.data, static_cast<size_t>(d.shape.numel())});
    } else {
      networks_[k]->backward();
    }
  }
}

std::string TreeEnsembleTape::describe() const {
  std::string out = cat("the objective is ", objective_, " (penalties ", penalty_, ")");
  for (size_t k = 0; k < networks_.size(); ++k) {
    if (!networks_[k]) continue;
    const std::string network = networks_[k]->describe();
    if (network.find("non-finite") != std::string::npos) return cat(out, "; ", network_name(k), ": ", network);
  }
  if (head_) {
    if (const std::string node = head_->tape->first_non_finite(); !node.empty()) {
      return cat(out, "; the first non-finite value of the penalties is at ", node);
    }
  }
  return out;
}

}  // namespace pens
