#include <algorithm>

#include "pens/graph/pass.h"
#include "pens/ops/op.h"

namespace pens {

namespace {

// Whether a node slices a table's columns only (a subspace of the word vectors): a gather
// along an axis, or along several, none of them the table's rows.
bool slices_columns(const Node& n, int rank) {
  if (n.op->name == "gather") return resolve_axis(n.attrs.get_int("axis"), rank) >= 1;
  if (n.op->name != "gather_axes") return false;
  const auto& axes = n.attrs.get_ints("axes");
  return std::all_of(axes.begin(), axes.end(), [&](int64_t a) { return resolve_axis(a, rank) >= 1; });
}

// The noise steps between an embedding's table input and a parameter, nearest the
// parameter first; empty when the table is not such a chain.
std::vector<NodeId> noise_chain(const Graph& g, NodeId table) {
  std::vector<NodeId> chain;
  NodeId v = table;
  while (!is_param(g[v])) {
    const std::string& op = g[v].op->name;
    if (!(op == "gaussian_noise" || op == "gather" || op == "gather_axes") || g.consumers(v).size() != 1) return {};
    chain.push_back(v);
    v = g.inputs(v)[0];
  }
  // The steps keep the parameter's rank; a slice may not pick rows.
  const auto rank = static_cast<int>(g[v].attrs.get_ints("shape").size());
  for (NodeId step : chain) {
    if (g[step].op->name != "gaussian_noise" && !slices_columns(g[step], rank)) return {};
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

}  // namespace

Graph LookupFirst::run(const Graph& in) const {
  Graph g = in;
  for (NodeId lookup : in.nodes()) {
    if (g[lookup].op->name != "embedding") continue;
    const std::vector<NodeId> inputs = g.inputs(lookup);
    const NodeId table = inputs[0], ids = inputs[1];
    const std::vector<NodeId> chain = noise_chain(g, table);
    if (chain.empty()) continue;
    // Row-wise noise needs one id per row: ids fed as a rank-1 input, a table of rank 2
    // (noise steps keep the parameter's rank).
    const NodeId param = g.inputs(chain.front())[0];
    if (!is_input(g[ids]) || g[ids].attrs.get_ints("shape").size() != 1 ||
        g[param].attrs.get_ints("shape").size() != 2) {
      continue;
    }
    const std::string name = g[lookup].name;
    const Node looked_up = g[lookup];
    g.rename(lookup, name + "/table");
    NodeId rows = g.add("embedding", {param, ids}, {}, name + "/rows");
    g.node(rows).layer = looked_up.layer;
    g.node(rows).role = looked_up.role;
    for (NodeId step : chain) {
      const Node n = g[step];  // a copy: adding nodes moves the graph's vertices
      NodeId next;
      if (n.op->name == "gaussian_noise") {
        // The fuzz of a parameter (no batch, so no row offset): its sigma and stream.
        next = g.add("lookup_noise", {rows, ids},
                     {{"sigma", n.attrs.get_float("sigma")}, {"stream", n.attrs.get_int("stream")}}, n.name + "/rows");
      } else {
        next = g.add(n.op->name, {rows, g.inputs(step)[1]}, n.attrs, n.name + "/rows");
      }
      g.node(next).layer = n.layer;
      g.node(next).role = n.role;
      rows = next;
    }
    // The last step takes the lookup's place: its name, flags and consumers.
    g.replace_uses(lookup, rows);
    g.node(rows).flags = looked_up.flags;
    g.node(rows).noise = looked_up.noise;
    g.node(lookup).flags = 0;
    g.rename(rows, name);
  }
  return g;
}

}  // namespace pens
