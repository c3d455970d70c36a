#include "pens/models/autoencoder.h"

#include "pens/graph/noise.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/op.h"

namespace pens {

namespace {

// Copies a parameter node of `from` into `to` under the same name, attributes and flags.
NodeId copy_param(Graph& to, const Graph& from, NodeId p) {
  const NodeId v = to.add("parameter", {}, from[p].attrs, from[p].name);
  to.node(v).layer = from[p].layer;
  to.node(v).flags = from[p].flags;
  return v;
}

}  // namespace

Model denoising_autoencoder(const Graph& network, const AutoencoderSpec& spec) {
  const NodeId affine = network.at(spec.node);
  if (network[affine].op->name != "affine") {
    fail("autoencoder layer '", spec.node, "': the encoder must be an affine node, it is ", network[affine].op->name);
  }
  const std::vector<NodeId> consumers = network.consumers(affine);
  if (consumers.size() != 1 || network.inputs(consumers[0]).size() != 1) {
    fail("autoencoder layer '", spec.node, "': its value must feed exactly one activation (a one-input op)");
  }
  const NodeId activation = consumers[0];
  const std::vector<NodeId> in = network.inputs(affine);  // x, W, b
  const std::vector<int64_t> w_shape = network[in[1]].attrs.get_ints("shape");
  const int64_t n_in = w_shape[0];

  Model ae;
  Graph& g = ae.graph;
  const NodeId x = g.input("x", {kBatch, n_in});
  g.node(x).layer = "in";
  for (const NoiseAnnotation& a : spec.corruption) add_noise(g, x, a.kind, a.params);
  const NodeId target = g.input("target", {kBatch, n_in});
  const NodeId w = copy_param(g, network, in[1]);
  if (spec.weight_noise > 0) add_noise(g, w, "fuzz", {{"sigma", spec.weight_noise}});
  const NodeId b = copy_param(g, network, in[2]);
  const NodeId visible_bias = g.param(spec.node + "/visible_bias", {n_in}, {{"init", std::string("zeros")}});
  const NodeId a = g.add("affine", {x, w, b}, network[affine].attrs, network[affine].name);
  const NodeId code = g.add(network[activation].op->name, {a}, network[activation].attrs, network[activation].name);
  g.node(a).layer = g.node(code).layer = "code";
  const NodeId decoded = g.add("matmul", {code, w}, {{"transpose_b", int64_t{1}}}, "decoded");
  const NodeId recon = g.add("add", {decoded, visible_bias}, {}, "recon");
  g.node(decoded).layer = g.node(recon).layer = "recon";
  g.set_flag(recon, kOutput);
  const NodeId err = g.add("squared_error", {recon, target}, {}, "recon_error");
  g.set_flag(g.add("mean", {err}, {}, "reconstruction"), kLoss);
  if (spec.l1 > 0) {
    const NodeId per_row = g.add("sum", {g.add("abs", {code}, {}, "code_abs")}, {{"axes", std::vector<int64_t>{1}}}, "code_l1");
    const NodeId mean = g.add("mean", {per_row}, {}, "code_l1_mean");
    g.set_flag(g.add("scale", {mean}, {{"factor", spec.l1}}, "activity_l1"), kLoss);
  }
  if (spec.sparsity > 0) {
    const auto l1 = [&](NodeId unit, int64_t axis, const std::string& name) {
      const NodeId sums = g.add("sum", {g.add("abs", {unit}, {}, name + "_abs")}, {{"axes", std::vector<int64_t>{axis}}},
                                name + "_l1");
      return g.add("mean", {sums}, {}, name + "_l1_mean");
    };
    const NodeId rows = l1(g.add("l2_normalize", {code}, {{"eps", 1e-6}}, "code_unit_rows"), 1, "code_unit_rows");
    const NodeId cols =
        l1(g.add("l2_normalize_columns", {code}, {{"eps", 1e-6}}, "code_unit_columns"), 0, "code_unit_columns");
    g.set_flag(g.add("scale", {g.add("add", {rows, cols}, {}, "code_sparsity")}, {{"factor", spec.sparsity}},
                     "sparsity"),
               kLoss);
  }
  PseudoEnsembleSpec one_child;
  one_child.children = 1;
  one_child.loss_on = "child";
  ae.ensemble = one_child;
  ae.metadata = {{"description", cat("denoising autoencoder of layer ", spec.node, " (pens pretrain)")}};
  return ae;
}

}  // namespace pens
