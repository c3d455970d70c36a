#include "pens/models/batch_norm.h"

#include "pens/graph/infer.h"
#include "pens/ops/ir/error.h"

namespace pens {

NodeId add_batch_norm(Graph& g, NodeId x, const std::string& name, const BatchNormSpec& spec) {
  const std::string layer = g[x].layer;
  const auto constant = [](double v) { return Attributes{{"init", std::string("constant")}, {"value", v}}; };
  // The width comes from shape inference: a parameter needs it when it is added.
  const std::vector<ValueInfo> values = infer_values(g, kVerifyBatch);
  const Shape& in = values[x].shape;
  if (in.rank != 2) fail("batch norm '", name, "': x must be [rows, features], got ", in.str());
  const int64_t n = in[1];
  const NodeId scale = g.param(name + "/scale", {n}, constant(1));
  const NodeId shift = g.param(name + "/shift", {n}, constant(0));
  const NodeId running_mean = g.param(name + "/running_mean", {n}, constant(0));
  const NodeId running_var = g.param(name + "/running_var", {n}, constant(1));
  g.set_flag(running_mean, kFrozen);
  g.set_flag(running_var, kFrozen);
  const NodeId mean = g.add("mean", {x}, {{"axes", std::vector<int64_t>{0}}}, name + "/mean");
  const NodeId var = g.add("batch_variance", {x, mean}, {}, name + "/var");
  const NodeId out = g.add("normalize", {x, mean, var, scale, shift}, {{"eps", spec.eps}}, name);
  for (NodeId v : {mean, var, out}) g.node(v).layer = layer;
  g.add_average({.param = g[running_mean].name, .source = g[mean].name, .decay = spec.decay});
  g.add_average({.param = g[running_var].name, .source = g[var].name, .decay = spec.decay});
  return out;
}

}  // namespace pens
