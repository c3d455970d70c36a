// The penalty pass: PEA agreement penalties between the partial-noise taps of the
// children (and of the parent), each built by its kind from the penalty registry
// (graph/penalty.h; the kinds are described in docs/pseudo-ensembles.md).
#include <algorithm>
#include <map>

#include "pens/graph/infer.h"
#include "pens/graph/penalty.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/ops/ir/error.h"

namespace pens {

std::vector<PenaltyHandle> add_penalties(Perturbed& perturbed, const PseudoEnsembleSpec& spec,
                                         const EnsembleOptions& options) {
  spec.validate();
  Graph& g = perturbed.graph;
  // Shapes of the graph as the perturb pass left it: the nodes penalties tap are in it
  // and keep their shapes while penalties are added.
  const std::vector<ValueInfo> values = infer_values(g, std::max(kVerifyBatch, options.labeled_rows + 1));
  std::vector<PenaltyHandle> handles;
  for (size_t index = 0; index < spec.penalties.size(); ++index) {
    const PenaltyTerm& term = spec.penalties[index];
    const std::string where = cat("penalty ", term.kind, " on '", term.node, "'");
    // Errors about the term point at its entry in the spec: its node, or its rows.
    const auto fail_term = [&](const char* field, const auto&... args) {
      throw Error(cat(where, args...), "", cat("penalties/", index, "/", field));
    };
    const PenaltyKind& kind = PenaltyRegistry::global().at(term.kind);
    const auto node = g.find(term.node);
    // The losses were rebuilt per child by the perturb pass, so a loss node of the model is
    // not found here either.
    if (!node) {
      fail_term("node", ": no node '", term.node, "' in the network the children compute (the model has none of that "
                "name, or it is a loss: penalize an activity, such as the output)");
    }
    // The pair's first side on the parent: the node itself, or the target it is compared with.
    const auto parent = term.target.empty() ? node : g.find(term.target);
    if (!parent) {
      fail_term("target", ": no node '", term.target, "' in the parent's network (the model has none of that name, ",
                "or it is a loss)");
    }
    if (values[*parent].shape != values[*node].shape) {
      fail_term("target", ": the target '", term.target, "' is ", values[*parent].shape.str(), ", '", term.node,
                "' is ", values[*node].shape.str(), ": a penalty compares values of one shape");
    }
    PenaltyHandle h;
    h.term = term;
    h.pairing = spec.pairing_of(term);
    h.layer = g[*node].layer;
    std::vector<NodeId> taps;
    for (int64_t k : spec.children_of(term)) {
      const auto& child = perturbed.taps.at(static_cast<size_t>(k - 1));
      auto tap = child.find(term.node);
      if (tap == child.end()) {
        // Children compute every non-leaf node a penalty names (the perturb pass's roots).
        fail_term("node", ": '", term.node, "' is not part of the network the children compute: it is a leaf (an ",
                  "input, parameter or constant) they share with the parent; penalize a node computed from it");
      }
      h.children.push_back(tap->second);
      taps.push_back(g.at(tap->second));
    }
    if (taps.empty()) fail(where, ": the pseudo-ensemble has no children to tap");
    std::map<std::string, double> params = kind.params;
    for (const auto& [name, value] : term.params) params[name] = value;
    PenaltyBuilder b(g, cat("pen/", term.node, "/", term.kind), h.layer, spec.smoothing,
                     values[*node].shape.cols(), std::move(params));

    // The rows the penalty covers.
    auto rows = [&](NodeId v) {
      if (term.rows == "all" || (term.rows == "labeled" && options.labeled_rows < 0)) return v;
      if (options.labeled_rows < 0) {
        fail_term("rows", ": rows 'unlabeled' need a batch with unlabeled rows (labeled_rows is not set)");
      }
      Attributes a{{"axis", int64_t{0}}, {"begin", int64_t{0}}, {"end", options.labeled_rows}};
      if (term.rows == "unlabeled") a = {{"axis", int64_t{0}}, {"begin", options.labeled_rows}};
      return b.add("slice", {v}, a);
    };

    // A fixed target: the pair's first side, its gradient stopped (built once per tap).
    std::map<NodeId, NodeId> targets;
    auto target = [&](NodeId v) {
      if (!term.fixed_target) return v;
      auto it = targets.find(v);
      return it != targets.end() ? it->second : targets[v] = b.add("stop_gradient", {v});
    };
    std::vector<NodeId> pairs;
    if (h.pairing == "parent-child") {
      const NodeId p = target(rows(*parent));
      for (NodeId t : taps) pairs.push_back(kind.per_row(b, p, rows(t)));
    } else {
      std::vector<NodeId> cut;
      for (NodeId t : taps) cut.push_back(rows(t));
      for (size_t i = 0; i < cut.size(); ++i) {
        for (size_t j = i + 1; j < cut.size(); ++j) {
          NodeId v = kind.per_row(b, target(cut[i]), cut[j]);
          if (kind.symmetrised && !term.fixed_target) {
            v = b.add("scale", {b.add("add", {v, kind.per_row(b, cut[j], cut[i])})}, {{"factor", 0.5}});
          }
          pairs.push_back(v);
        }
      }
    }
    NodeId total = pairs[0];
    for (size_t i = 1; i < pairs.size(); ++i) total = b.add("add", {total, pairs[i]});
    if (pairs.size() > 1) total = b.add("scale", {total}, {{"factor", 1.0 / static_cast<double>(pairs.size())}});
    const NodeId mean = b.add("mean", {total});
    const NodeId lambda = b.scalar(term.lambda, b.prefix() + "/lambda");
    const NodeId value = b.add("mul", {lambda, mean}, {}, b.prefix());
    g.set_flag(value, kLoss);
    h.value = g[value].name;
    h.lambda = g[lambda].name;
    handles.push_back(std::move(h));
  }
  return handles;
}

}  // namespace pens
