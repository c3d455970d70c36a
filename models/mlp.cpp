#include "pens/models/family.h"
#include "pens/models/mlp.h"

#include "pens/graph/noise.h"
#include "pens/models/batch_norm.h"
#include "pens/ops/ir/error.h"

namespace pens {

Graph build_mlp(const MlpSpec& spec) {
  if (spec.layers.size() < 2) fail("an MLP needs at least an input and an output width");
  for (int64_t w : spec.layers) {
    if (w < 1) fail("MLP layer widths must be positive, got ", w);
  }
  if (spec.loss != "softmax_xent" && spec.loss != "squared_hinge") {
    fail("unknown MLP loss '", spec.loss, "' (softmax_xent | squared_hinge)");
  }
  const size_t depth = spec.layers.size() - 1;
  if (!spec.layer_weight_std.empty() && spec.layer_weight_std.size() != depth) {
    fail("the MLP has ", depth, " weight matrices, but ", spec.layer_weight_std.size(),
         " initial standard deviations were given");
  }
  for (double s : spec.layer_weight_std) {
    if (!(s >= 0)) fail("an initial weight standard deviation must be >= 0, got ", s);
  }
  if (spec.batch_norm_output && !spec.batch_norm) fail("batch normalisation of the output needs batch_norm");
  Graph g;
  NodeId h = g.input("x", {kBatch, spec.layers[0]});
  g.node(h).layer = "in";
  if (!spec.input_mean.empty()) {
    if (static_cast<int64_t>(spec.input_mean.size()) != spec.layers[0]) {
      fail("the input mean has ", spec.input_mean.size(), " values, the input has ", spec.layers[0], " features");
    }
    const NodeId mean =
        g.add("constant", {}, {{"shape", std::vector<int64_t>{spec.layers[0]}}, {"values", spec.input_mean}}, "x_mean");
    h = g.add("sub", {h, mean}, {}, "xc");
    g.node(h).layer = "in";
  }
  if (spec.gaussian_input > 0) add_noise(g, h, "gaussian", {{"sigma", spec.gaussian_input}});
  if (spec.mask_input > 0) add_noise(g, h, "mask", {{"p", spec.mask_input}});
  const NodeId labels = g.input("y", {kBatch}, DType::Index);
  for (size_t i = 1; i <= depth; ++i) {
    const bool last = i == depth;
    const std::string layer = last ? "out" : cat("h", i);
    const double p = i == 1 ? spec.input_dropout : spec.hidden_dropout;
    if (p > 0) {
      h = g.add("dropout", {h}, {{"p", p}}, cat("drop", i));
      g.node(h).layer = layer;
    }
    const double w_std = spec.layer_weight_std.empty() ? spec.weight_std : spec.layer_weight_std[i - 1];
    Attributes w_init{{"init", std::string("normal")}, {"std", w_std}};
    if (spec.max_norm > 0) w_init.set("max_norm", spec.max_norm);
    const NodeId w = g.param(cat("W", i), {spec.layers[i - 1], spec.layers[i]}, w_init);
    if (spec.batch_norm && (!last || spec.batch_norm_output)) {
      h = g.add("matmul", {h, w}, {}, cat("a", i));
      g.node(h).layer = layer;
      h = add_batch_norm(g, h, cat("bn", i), {.decay = spec.batch_norm_decay});
      if (last) g.rename(h, "logits");
    } else {
      const NodeId b = g.param(cat("b", i), {spec.layers[i]},
                               {{"init", std::string("constant")},
                                {"value", last ? spec.output_bias : spec.hidden_bias}});
      h = g.add("affine", {h, w, b}, {}, last ? "logits" : cat("a", i));
      g.node(h).layer = layer;
    }
    if (!last) {
      if (spec.gaussian_bias > 0) add_noise(g, h, "gaussian", {{"sigma", spec.gaussian_bias}});
      h = g.add("relu", {h}, {}, layer);
      g.node(h).layer = layer;
      if (spec.mask_hidden > 0) add_noise(g, h, "mask", {{"p", spec.mask_hidden}});
    }
  }
  g.set_flag(h, kOutput);
  const NodeId losses = g.add(spec.loss, {h, labels}, {}, "losses");
  const NodeId loss = g.add("mean", {losses}, {}, "loss");
  g.set_flag(loss, kLoss);
  return g;
}

ModelFamily mlp_family() {
  const auto number = [](const char* name, double value, AttrRange range, const char* doc) {
    return AttrSpec{.name = name, .type = AttrType::Float, .default_value = AttrValue(value), .doc = doc, .range = range};
  };
  const MlpSpec d;
  const AttrRange probability = AttrRange::from_below(0, 1), non_negative = AttrRange::at_least(0);
  return {.name = "mlp",
          .summary = "a ReLU network with noise annotations (pens new mlp has more: penalties, a teacher)",
          .settings = {{.name = "layers", .type = AttrType::Ints,
                        .default_value = AttrValue(std::vector<int64_t>{784, 800, 800, 10}),
                        .doc = "widths, input first"},
                       number("weight_std", d.weight_std, non_negative, "initial weights' standard deviation"),
                       number("hidden_bias", d.hidden_bias, {}, "initial hidden biases"),
                       number("output_bias", d.output_bias, {}, "initial output biases"),
                       number("max_norm", 0, non_negative, "L2 bound on each unit's incoming weights (0: none)"),
                       number("mask_input", 0, probability, "mask noise on the input"),
                       number("mask_hidden", 0, probability, "mask noise on each hidden layer"),
                       number("gaussian_input", 0, non_negative, "Gaussian noise on the input"),
                       number("gaussian_bias", 0, non_negative, "Gaussian noise on each hidden pre-activation"),
                       {.name = "loss", .type = AttrType::String, .default_value = AttrValue(d.loss),
                        .doc = "softmax_xent or squared_hinge"}},
          .build = [](const Attributes& s) {
            MlpSpec spec;
            spec.layers = s.get_ints("layers");
            spec.weight_std = s.get_float("weight_std");
            spec.hidden_bias = s.get_float("hidden_bias");
            spec.output_bias = s.get_float("output_bias");
            spec.max_norm = s.get_float("max_norm");
            spec.mask_input = s.get_float("mask_input");
            spec.mask_hidden = s.get_float("mask_hidden");
            spec.gaussian_input = s.get_float("gaussian_input");
            spec.gaussian_bias = s.get_float("gaussian_bias");
            spec.loss = s.get_string("loss");
            Model model;
            model.graph = build_mlp(spec);
            return model;
          }};
}

}  // namespace pens
