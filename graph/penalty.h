// Penalty kinds: how a PEA agreement penalty V(a, b) between two tapped activities is
// computed, one value per row, from ordinary ops (so the tape differentiates it like
// anything else, with gradients flowing into both arguments). The set is open, like ops
// and noise kinds: a kind is a name, a doc line, whether it is symmetrised, and a
// function that adds the nodes of V for one pair of taps; register a new one with
// PenaltyRegistry::register_global() and model files can name it.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pens/graph/graph.h"
#include "pens/ops/ir/named_table.h"

namespace pens {

// Adds the nodes of one penalty term (a kind's formula, its rows, its λ) to the graph,
// named "<prefix>/<op><n>", role "penalty", in the tapped node's layer.
class PenaltyBuilder {
 public:
  // `params`: the kind's parameters, the term's values over the kind's defaults.
  PenaltyBuilder(Graph& g, std::string prefix, std::string layer, double smoothing, int64_t classes,
                 std::map<std::string, double> params = {})
      : g_(g),
        prefix_(std::move(prefix)),
        layer_(std::move(layer)),
        smoothing_(smoothing),
        classes_(classes),
        params_(std::move(params)) {}

  const std::string& prefix() const { return prefix_; }
  // The value of one of the kind's parameters (PenaltyKind::params).
  double param(const std::string& name) const;
  // A node of the term; `name` empty: an automatic one under the prefix.
  NodeId add(std::string_view op, const std::vector<NodeId>& inputs, Attributes attrs = {},
             std::string name = {});
  NodeId scalar(double value, std::string name = {});
  // Σ over the last axis: [R, C] -> [R].
  NodeId row_sum(NodeId x);
  // softmax(a), smoothed as in the authors' code: (softmax + s) / (1 + C s) with the
  // spec's smoothing s and C classes (the tapped node's last dimension); built once per
  // tap and shared by every use in the term.
  NodeId probs(NodeId a);
  // log of probs(a) (log_softmax when there is no smoothing).
  NodeId log_probs(NodeId a);

 private:
  Graph& g_;
  std::string prefix_;
  std::string layer_;
  double smoothing_;
  int64_t classes_;
  std::map<std::string, double> params_;
  int counter_ = 0;
  std::optional<NodeId> smoothing_node_;  // the constant s, shared by every softmax of the term
  std::map<NodeId, NodeId> probs_, log_probs_;
};

struct PenaltyKind {
  static constexpr const char* kWhat = "penalty kind";
  std::string name;     // what model files write: "kl"
  std::string summary;  // one line for docs and `pens kinds`: its formula
  // Asymmetric kinds are symmetrised between two children, (V(a, b) + V(b, a)) / 2, as
  // the authors' code does; a parent-child pair is V(parent, child).
  bool symmetrised = false;
  // V(a, b) for each row of two taps of the same shape [R, ...]: a node of shape [R].
  std::function<NodeId(PenaltyBuilder&, NodeId a, NodeId b)> per_row;
  // The parameters a term may set ("params" in model files), with their defaults:
  // {"threshold", 0.95} for pseudo_label. A term naming another is an error.
  std::map<std::string, double> params = {};
};

// PenaltyRegistry::global().at("kl"); PenaltyRegistry::register_global(kind) adds one.
using PenaltyRegistry = Registry<PenaltyKind>;
template <>
std::vector<PenaltyKind> builtin_kinds<PenaltyKind>();

}  // namespace pens
