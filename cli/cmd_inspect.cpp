#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/ensemble_args.h"
#include "graph/infer.h"
#include "graph/printers.h"
#include "ops/op.h"
#include "serialization/model_file.h"

namespace pens::cli {

namespace {
using json = nlohmann::json;

const std::vector<PenaltyHandle>& taps_of(const BuiltGraph& built) {
  static const std::vector<PenaltyHandle> none;
  return built.ensemble ? built.ensemble->penalties : none;
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
          {"taps", tap_list}};
}
}  // namespace

int run_inspect(const std::vector<std::string>& argv) {
  std::vector<std::string> options = kEnsembleOptions;
  options.push_back("format");
  const Args args(argv, {"parent"}, options);
  const Model model = load_model(args.one_positional("a model file"));
  const BuiltGraph built = build_for_cli(model, args);
  const std::vector<PenaltyHandle>& taps = taps_of(built);
  const std::string format = args.option("format").value_or("text");
  if (format == "json") {
    std::cout << inspect_json(built).dump(2) << "\n";
  } else if (format == "dot") {
    write_dot(std::cout, built.graph, built.batch);
  } else if (format == "text") {
    std::cout << to_text(built.graph, built.batch);
    if (built.ensemble) {
      int64_t params = 0;
      for (NodeId v : built.graph.nodes()) params += is_param(built.graph[v]);
      std::cout << "\npseudo-ensemble: " << built.ensemble->spec.children << " children sharing " << params
                << " parameter nodes; " << taps.size() << " taps\n";
      for (const PenaltyHandle& t : taps) {
        std::cout << "  tap " << t.layer << ": parent " << (t.parent.empty() ? "-" : t.parent) << ", children";
        for (const std::string& c : t.children) std::cout << " " << c;
        std::cout << "; " << t.term.kind << ", lambda " << t.term.lambda << ", rows " << t.term.rows << "\n";
      }
    }
  } else {
    fail("--format must be text, dot or json, got '", format, "'");
  }
  return 0;
}

}  // namespace pens::cli
