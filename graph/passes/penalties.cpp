// The penalty pass: PEA agreement penalties between the partial-noise taps of the
// children (and of the parent), per ALGORITHM.md section 3. Penalties are built from
// ordinary ops, so the tape differentiates them like anything else, with gradients
// flowing into both arguments.
#include <algorithm>
#include <map>

#include "graph/error.h"
#include "graph/infer.h"
#include "graph/noise.h"
#include "graph/pseudo_ensemble.h"
#include "ops/op.h"

namespace pens {

namespace {

// Adds the nodes of one penalty term, named "pen/<node>/<kind>/...".
class TermBuilder {
 public:
  TermBuilder(Graph& g, const PenaltyTerm& term, double smoothing, std::string layer)
      : g_(g), term_(term), smoothing_(smoothing), layer_(std::move(layer)),
        prefix_(cat("pen/", term.node, "/", term.kind)) {}

  const std::string& prefix() const { return prefix_; }

  NodeId add(std::string_view op, const std::vector<NodeId>& inputs, Attributes attrs = {},
             std::string name = {}) {
    if (name.empty()) name = cat(prefix_, "/", op, counter_++);
    const NodeId v = g_.add(op, inputs, std::move(attrs), std::move(name));
    g_.node(v).role = "penalty";
    g_.node(v).layer = layer_;
    return v;
  }
  NodeId scalar(double value, std::string name = {}) {
    return add("constant", {}, {{"shape", std::vector<int64_t>{}}, {"value", value}}, std::move(name));
  }
  NodeId row_sum(NodeId x) { return add("sum", {x}, {{"axes", std::vector<int64_t>{-1}}}); }

  // softmax(a), smoothed as in the authors' code: (softmax + s) / (1 + C s).
  NodeId probs(NodeId a) {
    auto it = probs_.find(a);
    if (it != probs_.end()) return it->second;
    NodeId p = add("softmax", {a});
    if (smoothing_ > 0) {
      if (smoothing_node_ == kNone) smoothing_node_ = scalar(smoothing_);
      p = add("add", {p, smoothing_node_});
      p = add("scale", {p}, {{"factor", 1.0 / (1.0 + smoothing_ * static_cast<double>(classes_))}});
    }
    return probs_[a] = p;
  }
  NodeId log_probs(NodeId a) {
    auto it = log_probs_.find(a);
    if (it != log_probs_.end()) return it->second;
    return log_probs_[a] = smoothing_ > 0 ? add("log", {probs(a)}) : add("log_softmax", {a});
  }

  // V(a, b) for each row: [R].
  NodeId per_row(NodeId a, NodeId b) {
    const std::string& kind = term_.kind;
    if (kind == "kl") {  // Σ p_a (log p_a − log p_b)
      return row_sum(add("mul", {probs(a), add("sub", {log_probs(a), log_probs(b)})}));
    }
    if (kind == "xent") {  // −Σ p_a log p_b
      return add("scale", {row_sum(add("mul", {probs(a), log_probs(b)}))}, {{"factor", -1.0}});
    }
    if (kind == "tanh") return add("squared_error", {add("tanh", {a}), add("tanh", {b})});
    if (kind == "direction") {  // ‖â − b̂‖², â = a / sqrt(‖a‖² + 1e-6)
      return add("squared_error", {add("l2_normalize", {a}, {{"eps", 1e-6}}),
                                   add("l2_normalize", {b}, {{"eps", 1e-6}})});
    }
    return add("squared_error", {a, b});  // l2
  }

  // The smoothing's class count: the tapped node's last dimension.
  void set_classes(int64_t classes) { classes_ = classes; }

 private:
  Graph& g_;
  const PenaltyTerm& term_;
  double smoothing_;
  std::string layer_;
  std::string prefix_;
  int counter_ = 0;
  int64_t classes_ = 0;
  static constexpr NodeId kNone = static_cast<NodeId>(-1);
  NodeId smoothing_node_ = kNone;  // the constant s, shared by every softmax of the term
  std::map<NodeId, NodeId> probs_, log_probs_;
};

}  // namespace

Graph PenaltyPass::run(const Graph& perturbed) const {
  spec_.validate();
  Graph g = perturbed;
  // Shapes of the graph as the perturb pass left it: the nodes penalties tap are in it
  // and keep their shapes while penalties are added.
  const std::vector<ValueInfo> values = infer_values(perturbed, std::max(kVerifyBatch, options_.labeled_rows + 1));
  for (const PenaltyTerm& term : spec_.penalties) {
    const std::string where = cat("penalty ", term.kind, " on '", term.node, "'");
    const auto parent = g.find(term.node);
    if (!parent) fail(where, ": the model has no node named '", term.node, "'");
    std::vector<NodeId> taps;
    for (int k = 1; k <= spec_.children; ++k) {
      const auto tap = g.find(child_prefix(k) + term.node);
      if (!tap) fail(where, ": '", term.node, "' is not part of the network the children compute");
      taps.push_back(*tap);
    }
    TermBuilder b(g, term, spec_.smoothing, g[*parent].layer);
    b.set_classes(values[*parent].shape.cols());

    // The rows the penalty covers.
    auto rows = [&](NodeId v) {
      if (term.rows == "all" || (term.rows == "labeled" && options_.labeled_rows < 0)) return v;
      if (options_.labeled_rows < 0) {
        fail(where, ": rows 'unlabeled' need a batch with unlabeled rows (labeled_rows is not set)");
      }
      Attributes a{{"axis", int64_t{0}}, {"begin", int64_t{0}}, {"end", options_.labeled_rows}};
      if (term.rows == "unlabeled") a = {{"axis", int64_t{0}}, {"begin", options_.labeled_rows}};
      return b.add("slice", {v}, a);
    };

    std::vector<NodeId> pairs;
    const bool symmetrise = term.kind == "kl" || term.kind == "xent";
    if (spec_.pairing == "parent-child") {
      const NodeId p = rows(*parent);
      for (NodeId t : taps) pairs.push_back(b.per_row(p, rows(t)));
    } else {
      std::vector<NodeId> cut;
      for (NodeId t : taps) cut.push_back(rows(t));
      for (size_t i = 0; i < cut.size(); ++i) {
        for (size_t j = i + 1; j < cut.size(); ++j) {
          NodeId v = b.per_row(cut[i], cut[j]);
          // (V(a1, a2) + V(a2, a1)) / 2 for the asymmetric penalties, as the authors do.
          if (symmetrise) v = b.add("scale", {b.add("add", {v, b.per_row(cut[j], cut[i])})}, {{"factor", 0.5}});
          pairs.push_back(v);
        }
      }
    }
    NodeId total = pairs[0];
    for (size_t i = 1; i < pairs.size(); ++i) total = b.add("add", {total, pairs[i]});
    if (pairs.size() > 1) total = b.add("scale", {total}, {{"factor", 1.0 / static_cast<double>(pairs.size())}});
    const NodeId mean = b.add("mean", {total});
    const NodeId lambda = b.scalar(term.lambda, b.prefix() + "/lambda");
    g.set_flag(b.add("mul", {lambda, mean}, {}, b.prefix()), kLoss);
  }
  return g;
}

std::vector<Tap> tap_table(const Graph& ensemble, const PseudoEnsembleSpec& spec) {
  std::vector<Tap> out;
  for (const PenaltyTerm& term : spec.penalties) {
    Tap t;
    for (int k = 1; ensemble.find(child_prefix(k) + term.node); ++k) {
      t.children.push_back(child_prefix(k) + term.node);
    }
    if (t.children.empty()) fail("the graph has no child taps of '", term.node, "'");
    t.layer = ensemble[t.children[0]].layer;
    if (auto p = ensemble.find(term.node); p && ensemble[*p].role == "parent") t.parent = term.node;
    t.penalty = term.kind;
    t.lambda = term.lambda;
    t.rows = term.rows;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace pens
