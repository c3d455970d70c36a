#include "pens/graph/penalty.h"

#include "pens/ops/ir/error.h"

namespace pens {

NodeId PenaltyBuilder::add(std::string_view op, const std::vector<NodeId>& inputs, Attributes attrs,
                           std::string name) {
  if (name.empty()) name = cat(prefix_, "/", op, counter_++);
  const NodeId v = g_.add(op, inputs, std::move(attrs), std::move(name));
  g_.node(v).role = "penalty";
  g_.node(v).layer = layer_;
  return v;
}

NodeId PenaltyBuilder::scalar(double value, std::string name) {
  return add("constant", {}, {{"shape", std::vector<int64_t>{}}, {"value", value}}, std::move(name));
}

double PenaltyBuilder::param(const std::string& name) const {
  auto it = params_.find(name);
  if (it == params_.end()) fail(prefix_, ": the penalty kind declares no parameter '", name, "'");
  return it->second;
}

NodeId PenaltyBuilder::row_sum(NodeId x) { return add("sum", {x}, {{"axes", std::vector<int64_t>{-1}}}); }

NodeId PenaltyBuilder::probs(NodeId a) {
  auto it = probs_.find(a);
  if (it != probs_.end()) return it->second;
  NodeId p = add("softmax", {a});
  if (smoothing_ > 0) {
    if (!smoothing_node_) smoothing_node_ = scalar(smoothing_);
    p = add("add", {p, *smoothing_node_});
    p = add("scale", {p}, {{"factor", 1.0 / (1.0 + smoothing_ * static_cast<double>(classes_))}});
  }
  return probs_[a] = p;
}

NodeId PenaltyBuilder::log_probs(NodeId a) {
  auto it = log_probs_.find(a);
  if (it != log_probs_.end()) return it->second;
  return log_probs_[a] = smoothing_ > 0 ? add("log", {probs(a)}) : add("log_softmax", {a});
}

namespace {

// The paper's V^k, V^x, V^t and V^c (section 3 of docs/pseudo-ensembles.md), and plain L2.
PenaltyKind kl_kind() {
  return {"kl", "V^k: KL(softmax(a) || softmax(b)) = sum p_a (log p_a - log p_b)", true,
          [](PenaltyBuilder& b, NodeId x, NodeId y) {
            return b.row_sum(b.add("mul", {b.probs(x), b.add("sub", {b.log_probs(x), b.log_probs(y)})}));
          }};
}

PenaltyKind xent_kind() {
  return {"xent", "V^x: cross-entropy -sum softmax(a) log softmax(b)", true,
          [](PenaltyBuilder& b, NodeId x, NodeId y) {
            return b.add("scale", {b.row_sum(b.add("mul", {b.probs(x), b.log_probs(y)}))}, {{"factor", -1.0}});
          }};
}

PenaltyKind tanh_kind() {
  return {"tanh", "V^t: ||tanh(a) - tanh(b)||^2", false, [](PenaltyBuilder& b, NodeId x, NodeId y) {
            return b.add("squared_error", {b.add("tanh", {x}), b.add("tanh", {y})});
          }};
}

PenaltyKind direction_kind() {
  return {"direction", "V^c: ||a^ - b^||^2 with a^ = a / sqrt(||a||^2 + 1e-6), about 2 - 2 cos(a, b)", false,
          [](PenaltyBuilder& b, NodeId x, NodeId y) {
            return b.add("squared_error", {b.add("l2_normalize", {x}, {{"eps", 1e-6}}),
                                           b.add("l2_normalize", {y}, {{"eps", 1e-6}})});
          }};
}

PenaltyKind l2_kind() {
  return {"l2", "||a - b||^2", false,
          [](PenaltyBuilder& b, NodeId x, NodeId y) { return b.add("squared_error", {x, y}); }};
}

// The consistency family that followed PEA (docs/pseudo-ensembles.md, section 6).

// The Π-model's (Laine & Aila 2017): squared error between the class probabilities.
PenaltyKind softmax_l2_kind() {
  return {"softmax_l2", "||softmax(a) - softmax(b)||^2 (the Pi-model's)", false,
          [](PenaltyBuilder& b, NodeId x, NodeId y) { return b.add("squared_error", {b.probs(x), b.probs(y)}); }};
}

// -sum p log p of softmax(logits), a row's entropy: entropy minimisation's term, on either
// side of a pair.
NodeId prediction_entropy(PenaltyBuilder& b, NodeId logits) {
  return b.add("scale", {b.row_sum(b.add("mul", {b.probs(logits), b.log_probs(logits)}))}, {{"factor", -1.0}});
}

// Entropy minimisation (Grandvalet & Bengio 2005): the entropy of a side's prediction.
// Symmetrised, a child-child pair penalises both children; a parent-child pair, or a
// fixed target, the child alone.
PenaltyKind entropy_kind() {
  return {"entropy", "H(softmax(b)) = -sum p_b log p_b, the entropy of b's prediction (a unused)", true,
          [](PenaltyBuilder& b, NodeId, NodeId y) { return prediction_entropy(b, y); }};
}

// Entropy minimisation on the pair's first side: the clean parent's prediction in a
// parent-child pair (the term of the VAT paper's "VAT+EntMin", Miyato et al. 2018), where
// `entropy` takes the child's. Not symmetrised: a child-child pair penalises its
// lower-numbered child. With fixed_target it passes no gradient (the side is a constant).
PenaltyKind target_entropy_kind() {
  return {"target_entropy", "H(softmax(a)) = -sum p_a log p_a, the entropy of a's prediction (b unused)", false,
          [](PenaltyBuilder& b, NodeId x, NodeId) { return prediction_entropy(b, x); }};
}

// Pseudo-labels (Lee 2013): cross-entropy of b against the argmax class of a, on the
// rows where a's largest probability reaches `threshold` (rows under it add 0; with a
// threshold, FixMatch's rule). The label is a target: pseudo_label passes no gradient.
PenaltyKind pseudo_label_kind() {
  return {"pseudo_label", "-log softmax(b)[argmax a] on rows where max softmax(a) >= threshold, else 0", false,
          [](PenaltyBuilder& b, NodeId x, NodeId y) {
            const NodeId label = b.add("pseudo_label", {x}, {{"threshold", b.param("threshold")}});
            return b.add("scale", {b.row_sum(b.add("mul", {label, b.log_probs(y)}))}, {{"factor", -1.0}});
          },
          {{"threshold", 0.95}}};
}

// The authors' activation L2 (their code's lam_l2a, 1e-3 on every layer): the mean square
// of a child's units. Symmetrised over a child pair it is the mean of both children's, as
// their code averages it over the children; it needs no agreement, only one side.
PenaltyKind activation_l2_kind() {
  return {"activation_l2", "mean over units of b^2, the energy of b's activity (a unused)", true,
          [](PenaltyBuilder& b, NodeId, NodeId y) {
            return b.add("mean", {b.add("square", {y})}, {{"axes", std::vector<int64_t>{-1}}});
          }};
}

}  // namespace

template <>
std::vector<PenaltyKind> builtin_kinds<PenaltyKind>() {
  return {kl_kind(),         xent_kind(),    tanh_kind(),         direction_kind(),     l2_kind(),
          softmax_l2_kind(), entropy_kind(), target_entropy_kind(), pseudo_label_kind(), activation_l2_kind()};
}

}  // namespace pens
