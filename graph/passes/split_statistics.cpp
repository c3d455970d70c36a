// The statistics-by-part pass: batch normalisation over the labeled rows and over the
// unlabeled rows separately. See graph/pass.h.
#include <algorithm>

#include "pens/graph/pass.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/op.h"

namespace pens {

namespace {

bool reads(const Graph& g, NodeId v, const std::vector<NodeId>& inputs) {
  const std::vector<NodeId> in = g.inputs(v);
  return in.size() >= inputs.size() && std::equal(inputs.begin(), inputs.end(), in.begin());
}

// A batch normalisation block around a running mean's source: mean = mean over rows of
// x, var = batch_variance(x, mean), and the normalize nodes reading (x, mean, var).
struct NormBlock {
  NodeId x = 0, mean = 0, var = 0;
  std::vector<NodeId> normalized;
};

NormBlock find_block(const Graph& g, NodeId mean) {
  const Node& m = g[mean];
  const auto refuse = [&](const std::string& why) {
    fail("statistics by part: '", m.name, "' (the source of a running statistic) ", why,
         "; only batch normalisation blocks (mean over rows of x, batch_variance(x, mean), normalize(x, mean, var, "
         "...)) can be split");
  };
  if (m.op->name != "mean" || m.attrs.get_ints("axes") != std::vector<int64_t>{0}) {
    refuse("is not a mean over rows");
  }
  NormBlock b{.x = g.inputs(mean)[0], .mean = mean, .var = 0, .normalized = {}};
  const std::vector<NodeId> readers = g.consumers(mean);
  const auto var = std::find_if(readers.begin(), readers.end(), [&](NodeId c) {
    return g[c].op->name == "batch_variance" && reads(g, c, {b.x, mean});
  });
  if (var == readers.end()) refuse("has no batch_variance of the same rows");
  b.var = *var;
  for (NodeId c : readers) {
    if (g[c].op->name == "normalize" && reads(g, c, {b.x, mean, b.var})) b.normalized.push_back(c);
  }
  if (b.normalized.empty()) refuse("normalizes nothing");
  return b;
}

}  // namespace

Graph SplitStatistics::run(const Graph& in) const {
  Graph g = in;
  if (labeled_rows_ < 0) return g;  // every row labeled: one part
  std::vector<NodeId> means;
  for (const MovingAverage& a : in.averages()) {
    if (!a.at_inference || !of_batch_statistic(in, a)) continue;
    const NodeId source = in.at(a.source);
    if (in[source].op->name == "batch_variance") continue;  // found with its mean
    means.push_back(source);
  }
  for (NodeId mean : means) {
    const NormBlock b = find_block(g, mean);
    const std::string name = g[mean].name, rows = g[b.x].name;
    const std::string layer = g[b.x].layer;
    const auto add = [&](std::string_view op, const std::vector<NodeId>& inputs, Attributes attrs, std::string n) {
      const NodeId v = g.add(op, inputs, std::move(attrs), std::move(n));
      g.node(v).layer = layer;
      return v;
    };
    const NodeId labeled = add("slice", {b.x}, {{"axis", int64_t{0}}, {"begin", int64_t{0}}, {"end", labeled_rows_}},
                               rows + "/labeled_rows");
    const NodeId unlabeled =
        add("slice", {b.x}, {{"axis", int64_t{0}}, {"begin", labeled_rows_}}, rows + "/unlabeled_rows");
    // The block's own statistics become the labeled rows' (the running statistics keep
    // following them); the unlabeled rows get theirs.
    const std::vector<NodeId> readers_of_mean = g.consumers(mean), readers_of_var = g.consumers(b.var);
    g.set_inputs(mean, {labeled});
    g.set_inputs(b.var, {labeled, mean});
    const NodeId mean_u = add("mean", {unlabeled}, {{"axes", std::vector<int64_t>{0}}}, name + "/unlabeled");
    const NodeId var_u = add("batch_variance", {unlabeled, mean_u}, {}, g[b.var].name + "/unlabeled");
    for (NodeId n : b.normalized) {
      const Node original = g[n];
      std::vector<NodeId> in_l = g.inputs(n);  // x, mean, var, then scale and shift
      std::vector<NodeId> in_u = in_l;
      in_l[0] = labeled;
      in_u[0] = unlabeled;
      in_u[1] = mean_u;
      in_u[2] = var_u;
      const NodeId out_l = add("normalize", in_l, original.attrs, original.name + "/labeled");
      const NodeId out_u = add("normalize", in_u, original.attrs, original.name + "/unlabeled");
      const NodeId joined = add("concat", {out_l, out_u}, {{"axis", int64_t{0}}}, original.name + "/joined");
      g.replace_uses(n, joined);
      // The joined value takes the block's place: its name (penalties and taps name it),
      // its noise, its flags and its layer.
      g.rename(n, original.name + "/whole_batch");
      g.rename(joined, original.name);
      g.node(joined).noise = original.noise;
      g.node(joined).flags = original.flags;
      g.node(joined).layer = original.layer;
      g.node(n).noise.clear();
      g.node(n).flags = 0;
    }
    // Anything else reading the statistics (a ladder decoder normalising its estimates,
    // whose costs cover the unlabeled rows) reads the unlabeled rows'.
    const auto normalizes = [&](NodeId r) {
      return std::find(b.normalized.begin(), b.normalized.end(), r) != b.normalized.end();
    };
    for (NodeId r : readers_of_mean) {
      if (r == b.var || normalizes(r)) continue;
      std::vector<NodeId> inputs = g.inputs(r);
      std::replace(inputs.begin(), inputs.end(), mean, mean_u);
      g.set_inputs(r, inputs);
    }
    for (NodeId r : readers_of_var) {
      if (normalizes(r)) continue;
      std::vector<NodeId> inputs = g.inputs(r);
      std::replace(inputs.begin(), inputs.end(), b.var, var_u);
      g.set_inputs(r, inputs);
    }
  }
  return g;
}

}  // namespace pens
