// Probe bodies: for each probe node the perturb pass added (a noise kind whose
// perturbation is found from gradients, such as adversarial noise), the graph its
// gradients come from: the clean parent's output and the probed child's, computed from
// the same inputs, parameters and draws as in the training graph, with the probe node
// replaced by an input (the perturbation being tried), and the divergence between the
// two outputs as the objective. See ProbeBody (graph/graph.h).

#include <memory>

#include "pens/graph/infer.h"
#include "pens/graph/penalty.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/op.h"

namespace pens {

namespace {

Graph probe_body(const Graph& g, NodeId probe, const ProbeBody& body, NodeId target, NodeId probed,
                 double smoothing, int64_t batch) {
  const std::string name = g[probe].name;
  // What the two outputs depend on, the probe's own inputs aside: a second probe found on
  // the way would need a body inside this body.
  std::vector<char> keep(g.size(), 0);
  keep[target] = keep[probed] = 1;
  const std::vector<NodeId> order = g.topological_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!keep[*it] || *it == probe) continue;
    if (g[*it].op->name == "probe") {
      fail("node '", name, "' and node '", g[*it].name, "' are both probes of child ", body.child,
           ": a child may have one noise annotation found from gradients");
    }
    for (NodeId u : g.inputs(*it)) keep[u] = 1;
  }
  if (!keep[probe]) fail("probe '", name, "' is not below the output of child ", body.child);

  // The perturbation tried, an input of the probe's name and shape: the probed value's
  // consumers read it instead of the probe.
  const std::vector<ValueInfo> values = infer_values(g, batch);
  const std::vector<char> batched = batch_rows(g, batch);
  Shape shape = values[probe].shape;
  if (batched[probe]) shape[0] = kBatch;
  std::vector<NodeId> to_body;
  Graph b = copy_subgraph(g, keep, &to_body);
  const NodeId old = to_body[probe];
  b.rename(old, name + "/probe");
  b.replace_uses(old, b.input(name, shape));

  const std::string kind_name = body.params.get_string("divergence");
  const PenaltyKind* kind = PenaltyRegistry::global().find(kind_name);
  if (!kind) {
    fail("probe '", name, "': divergence: ", PenaltyRegistry::global().unknown(kind_name));
  }
  PenaltyBuilder pb(b, "probe/" + name, g[target].layer, smoothing, values[target].shape.cols());
  const NodeId per_row = kind->per_row(pb, to_body[target], to_body[probed]);
  b.set_flag(pb.add("sum", {per_row}, {}, pb.prefix()), kLoss);

  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(std::make_unique<LookupFirst>());
  passes.push_back(std::make_unique<PruneDeadNodes>());
  return run_passes(b, passes, batch);
}

}  // namespace

void add_probe_bodies(Perturbed& perturbed, const std::vector<std::string>& outputs, double smoothing,
                      int64_t batch) {
  Graph& g = perturbed.graph;
  std::vector<std::pair<NodeId, ProbeBody>> pending;
  for (const auto& [name, body] : g.probes()) {
    if (!body.graph) pending.emplace_back(g.at(name), body);
  }
  for (auto& [probe, body] : pending) {
    const std::string name = g[probe].name;
    if (outputs.size() != 1) {
      fail("probe '", name, "' measures the divergence at the network's output, and this model has ",
           outputs.size(), " output nodes; it needs one");
    }
    const auto& taps = perturbed.taps.at(static_cast<size_t>(body.child - 1));
    const NodeId target = g.at(outputs[0]), probed = g.at(taps.at(outputs[0]));
    body.graph = std::make_shared<const Graph>(probe_body(g, probe, body, target, probed, smoothing, batch));
    g.set_probe(probe, std::move(body));
  }
}

}  // namespace pens
