#include "pens/train/tasks/inspect.h"

#include <sstream>

#include "pens/autodiff/tape.h"
#include "pens/graph/infer.h"
#include "pens/graph/printers.h"
#include "pens/models/sst.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/op.h"
#include "pens/serialization/model_file.h"
#include "pens/train/tasks/tree_model.h"

namespace pens {

namespace {
using json = nlohmann::json;

const std::vector<PenaltyHandle>& taps_of(const BuiltGraph& built) {
  static const std::vector<PenaltyHandle> none;
  return built.ensemble ? built.ensemble->penalties : none;
}
}  // namespace

BuiltGraph build_graph(const Model& model, const BuildOptions& options) {
  if (options.batch < 1) fail("batch must be at least 1, got ", options.batch);
  BuiltGraph out;
  out.batch = options.batch;
  if (options.tree) {
    const std::string& source = options.tree_source;
    if (!model.tree) fail(source, ": the model is not a network over trees (it has no tree section)");
    std::vector<SentimentTree> trees = parse_trees(*options.tree, source);
    if (trees.size() != 1) fail(source, ": give one tree, got ", trees.size());
    const TreeModel tm(model, task_of(model));
    out.graph = (options.parent ? tm.unroll(trees[0]) : tm.training_tree(trees[0])).graph;
    return out;
  }
  if (options.parent || !model.ensemble) {
    out.graph = model.graph;
    return out;
  }
  if (model.tree) {
    // Its cell graph holds no loss: the pseudo-ensemble is built on a tree's unrolling.
    fail("a tree model's training graph is built for one tree: give one (pens: --tree '(3 (2 a) (4 b))'; "
         "Python: tree=\"(3 (2 a) (4 b))\"), or look at the cell as written (--parent, parent=True)");
  }
  PseudoEnsembleSpec spec = *model.ensemble;
  if (options.children) {
    if (*options.children < 1) fail("children must be at least 1, got ", *options.children);
    spec.children = *options.children;
  }
  if (options.pairing) spec.pairing = *options.pairing;
  if (options.penalty_kind) {
    for (PenaltyTerm& t : spec.penalties) t.kind = *options.penalty_kind;
  }
  EnsembleOptions ensemble_options;
  ensemble_options.labeled_rows = options.labeled_rows.value_or(spec.splits_rows() ? out.batch / 2 : -1);
  if (ensemble_options.labeled_rows >= out.batch) {
    fail("labeled rows ", ensemble_options.labeled_rows, " leave no unlabeled rows in a batch of ", out.batch);
  }
  out.ensemble = build_pseudo_ensemble(model.graph, spec, ensemble_options);
  out.graph = out.ensemble->graph;
  return out;
}

std::string inspect_text(const BuiltGraph& built) {
  std::ostringstream out;
  out << to_text(built.graph, built.batch);
  if (built.ensemble) {
    int64_t params = 0;
    for (NodeId v : built.graph.nodes()) params += is_param(built.graph[v]);
    const std::vector<PenaltyHandle>& taps = taps_of(built);
    out << "\npseudo-ensemble: " << built.ensemble->spec.children << " children sharing " << params
        << " parameter nodes; " << taps.size() << " taps\n";
    for (const PenaltyHandle& t : taps) {
      out << "  tap " << t.layer << ": parent " << (t.parent.empty() ? "-" : t.parent) << ", children";
      for (const std::string& c : t.children) out << " " << c;
      out << "; " << t.term.kind << ", lambda " << t.term.lambda << ", rows " << t.term.rows << ", " << t.pairing
          << "\n";
    }
  }
  const std::vector<std::vector<std::string>> stacks = stacked_products(built.graph, {.batch = built.batch});
  if (!stacks.empty()) {
    out << "\nstacked products (the tape runs each as one product over its nodes' rows):\n";
    for (const std::vector<std::string>& s : stacks) {
      out << "  " << s.front();
      for (size_t i = 1; i < s.size(); ++i) out << " + " << s[i];
      out << "\n";
    }
  }
  return out.str();
}

std::string inspect_dot(const BuiltGraph& built) {
  std::ostringstream out;
  write_dot(out, built.graph, built.batch);
  return out.str();
}

json inspect_json(const BuiltGraph& built) {
  const Graph& g = built.graph;
  const std::vector<ValueInfo> values = infer_values(g, built.batch);
  json nodes = json::array();
  int64_t params = 0;
  for (NodeId v : g.topological_order()) {
    const Node& n = g[v];
    params += is_param(n);
    json inputs = json::array();
    for (NodeId u : g.inputs(v)) inputs.push_back(g[u].name);
    json flags = json::array();
    if (n.has(kOutput)) flags.push_back("output");
    if (n.has(kLoss)) flags.push_back("loss");
    if (n.has(kFrozen)) flags.push_back("frozen");
    nodes.push_back({{"name", n.name},
                     {"op", n.op->name},
                     {"inputs", inputs},
                     {"role", n.role},
                     {"layer", n.layer},
                     {"shape", values[v].shape.to_vector()},
                     {"dtype", dtype_name(values[v].dtype)},
                     {"noise", noise_list_json(n.noise)},
                     {"flags", flags}});
  }
  json tap_list = json::array();
  for (const PenaltyHandle& t : taps_of(built)) {
    tap_list.push_back({{"layer", t.layer},
                        {"pairing", t.pairing},
                        {"parent", t.parent.empty() ? json(nullptr) : json(t.parent)},
                        {"children", t.children},
                        {"penalty", t.term.kind},
                        {"lambda", t.term.lambda},
                        {"rows", t.term.rows},
                        {"value", t.value},
                        {"lambda_node", t.lambda}});
  }
  return {{"batch", built.batch},
          {"children", built.ensemble ? built.ensemble->spec.children : 0},
          {"parameter_nodes", params},
          {"nodes", nodes},
          {"taps", tap_list},
          {"stacked_products", stacked_products(g, {.batch = built.batch})},
          {"moving_averages", averages_json(g.averages())}};
}

}  // namespace pens
