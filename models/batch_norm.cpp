#include "pens/models/batch_norm.h"

#include "pens/graph/infer.h"
#include "pens/ops/ir/error.h"

namespace pens {

namespace {

// The width of x [rows, n], from shape inference: a parameter or constant needs it when it
// is added.
int64_t features(const Graph& g, NodeId x, const std::string& name) {
  const Shape in = infer_values(g, kVerifyBatch)[x].shape;  // a copy: the values are a temporary
  if (in.rank != 2) fail("normalisation '", name, "': x must be [rows, features], got ", in.str());
  return in[1];
}

NodeId filled(Graph& g, double value, int64_t n) {
  const std::string name = cat(value == 0 ? "zeros" : "ones", n);
  if (const auto v = g.find(name)) return *v;
  return g.add("constant", {}, {{"shape", std::vector<int64_t>{n}}, {"value", value}}, name);
}

}  // namespace

NodeId add_normalization(Graph& g, NodeId x, NodeId mean, NodeId var, const std::string& name, double eps) {
  const int64_t n = features(g, x, name);
  return g.add("normalize", {x, mean, var, filled(g, 1.0, n), filled(g, 0.0, n)}, {{"eps", eps}}, name);
}

NodeId add_batch_norm(Graph& g, NodeId x, const std::string& name, const BatchNormSpec& spec) {
  const std::string layer = g[x].layer;
  const auto constant = [](double v) { return Attributes{{"init", std::string("constant")}, {"value", v}}; };
  const int64_t n = features(g, x, name);
  // Parameters first, in the order model files have always listed them.
  NodeId scale = 0, shift = 0, running_mean = 0, running_var = 0;
  if (spec.learnt_affine) {
    scale = g.param(name + "/scale", {n}, constant(1));
    shift = g.param(name + "/shift", {n}, constant(0));
  }
  if (spec.running_statistics) {
    running_mean = g.param(name + "/running_mean", {n}, constant(0));
    running_var = g.param(name + "/running_var", {n}, constant(1));
    g.set_flag(running_mean, kFrozen);
    g.set_flag(running_var, kFrozen);
  }
  const NodeId mean = g.add("mean", {x}, {{"axes", std::vector<int64_t>{0}}}, name + "/mean");
  const NodeId var = g.add("batch_variance", {x, mean}, {}, name + "/var");
  const NodeId out = spec.learnt_affine
                         ? g.add("normalize", {x, mean, var, scale, shift}, {{"eps", spec.eps}}, name)
                         : add_normalization(g, x, mean, var, name, spec.eps);
  for (NodeId v : {mean, var, out}) g.node(v).layer = layer;
  if (spec.running_statistics) {
    g.add_average({.param = g[running_mean].name, .source = g[mean].name, .decay = spec.decay});
    g.add_average({.param = g[running_var].name, .source = g[var].name, .decay = spec.decay});
  }
  return out;
}

}  // namespace pens
