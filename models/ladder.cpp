#include "pens/models/family.h"
#include "pens/models/ladder.h"

#include <cmath>
#include <string>

#include "pens/graph/noise.h"
#include "pens/models/batch_norm.h"
#include "pens/ops/ir/error.h"

namespace pens {

namespace {

Attributes filled(double value) { return {{"init", std::string("constant")}, {"value", value}}; }

// Weights N(0, 1 / fan_in), as the ladder paper initialises them.
Attributes scaled_normal(int64_t fan_in) {
  return {{"init", std::string("normal")}, {"std", 1.0 / std::sqrt(static_cast<double>(fan_in))}};
}

// The ladder paper's "vanilla" combinator: ẑ = (z̃ − μ(u)) ⊙ v(u) + μ(u), each of μ and v
// a1 ⊙ sigmoid(a2 ⊙ u + a3) + a4 ⊙ u + a5 with its own five per-unit parameter vectors,
// started so that ẑ = 0 (a2 = a7 = 1, the rest 0).
NodeId combinator(Graph& g, NodeId noisy, NodeId u, int64_t width, const std::string& prefix, const std::string& name) {
  std::vector<NodeId> a;
  for (int i = 1; i <= 10; ++i) {
    a.push_back(g.param(cat(prefix, "/a", i), {width}, filled(i == 2 || i == 7 ? 1.0 : 0.0)));
  }
  const auto curve = [&](size_t first, const std::string& part) {
    const NodeId inner = g.add("add", {g.add("mul", {a[first + 1], u}), a[first + 2]});
    const NodeId gate = g.add("mul", {a[first], g.add("sigmoid", {inner})});
    return g.add("add", {g.add("add", {gate, g.add("mul", {a[first + 3], u})}), a[first + 4]}, {}, prefix + "/" + part);
  };
  const NodeId mu = curve(0, "mu");
  const NodeId v = curve(5, "v");
  return g.add("add", {g.add("mul", {g.add("sub", {noisy, mu}), v}), mu}, {}, name);
}

}  // namespace

Model build_ladder(const LadderSpec& spec) {
  if (spec.layers.size() < 2) fail("a ladder network needs at least an input and an output width");
  const size_t depth = spec.layers.size() - 1;
  for (int64_t w : spec.layers) {
    if (w < 1) fail("ladder layer widths must be positive, got ", w);
  }
  if (spec.denoising.size() != spec.layers.size()) {
    fail("a ladder network takes one denoising weight per layer, input first: ", spec.layers.size(), " widths, ",
         spec.denoising.size(), " weights");
  }
  if (!(spec.noise >= 0)) fail("the ladder's noise must be >= 0, got ", spec.noise);
  const double input_noise = spec.input_noise.value_or(spec.noise);
  if (!(input_noise >= 0)) fail("the ladder's input noise must be >= 0, got ", input_noise);
  Model model;
  Graph& g = model.graph;
  const auto tag = [&](NodeId v, const std::string& layer) {
    g.node(v).layer = layer;
    return v;
  };

  // The encoder: the parent is the clean one; noise makes the child the corrupted one.
  std::vector<NodeId> z(depth + 1);
  z[0] = tag(g.input("x", {kBatch, spec.layers[0]}), "in");
  if (input_noise > 0) add_noise(g, z[0], "gaussian", {{"sigma", input_noise}});
  const NodeId labels = g.input("y", {kBatch}, DType::Index);
  NodeId h = z[0];
  NodeId logits = h;  // the last layer's, set below
  for (size_t l = 1; l <= depth; ++l) {
    const std::string layer = cat("l", l);
    const int64_t n = spec.layers[l];
    const NodeId w = g.param(cat("W", l), {spec.layers[l - 1], n}, scaled_normal(spec.layers[l - 1]));
    const NodeId a = tag(g.add("matmul", {h, w}, {}, cat("a", l)), layer);
    z[l] = add_batch_norm(g, a, cat("z", l), {.decay = spec.batch_norm_decay, .learnt_affine = false});
    if (spec.noise > 0) add_noise(g, z[l], "gaussian", {{"sigma", spec.noise}});
    const NodeId shifted = g.add("add", {z[l], g.param(cat("beta", l), {n}, filled(0.0))});
    if (l < depth) {
      h = tag(g.add("relu", {shifted}, {}, cat("h", l)), layer);
    } else {
      logits = tag(g.add("mul", {g.param(cat("gamma", l), {n}, filled(1.0)), shifted}, {}, "logits"), layer);
    }
  }
  g.set_flag(logits, kOutput);
  const NodeId loss = g.add("mean", {g.add("softmax_xent", {logits, labels}, {}, "losses")}, {}, "loss");
  g.set_flag(loss, kLoss);

  // The decoder, top down; the child computes it because its penalties name its nodes.
  PseudoEnsembleSpec pe;
  pe.children = 1;
  pe.pairing = "parent-child";
  pe.loss_on = "child";
  NodeId above = tag(g.add("softmax", {logits}, {}, "p"), cat("l", depth));
  for (size_t step = 0; step <= depth; ++step) {
    const size_t l = depth - step;
    const std::string layer = l == 0 ? std::string("in") : cat("l", l);
    const int64_t n = spec.layers[l];
    NodeId signal = above;
    if (l < depth) {
      const NodeId v = g.param(cat("V", l + 1), {spec.layers[l + 1], n}, scaled_normal(spec.layers[l + 1]));
      signal = tag(g.add("matmul", {above, v}), layer);
    }
    const NodeId u = add_batch_norm(g, signal, cat("u", l), {.learnt_affine = false, .running_statistics = false});
    const std::string name = l == 0 ? std::string("xhat") : cat("zhat", l);
    const NodeId estimate = tag(combinator(g, z[l], u, n, cat("g", l), name), layer);
    above = estimate;
    // Above the input the cost compares the estimate normalised with z<l>'s batch
    // statistics (the ladder's ẑ_BN) with z<l>.
    NodeId compared = estimate;
    if (l > 0) {
      NodeId mean = g.at(cat("z", l, "/mean")), var = g.at(cat("z", l, "/var"));
      if (spec.clean_estimate_statistics) {
        mean = tag(g.add("parent_value", {mean}, {}, cat("z", l, "/mean/clean")), layer);
        var = tag(g.add("parent_value", {var}, {}, cat("z", l, "/var/clean")), layer);
      }
      compared = tag(add_normalization(g, estimate, mean, var, name + "/bn"), layer);
    }
    pe.penalties.push_back({.node = g[compared].name,
                            .kind = "l2",
                            .lambda = spec.denoising[l] / static_cast<double>(n),
                            .target = g[z[l]].name});
  }
  pe.validate();
  model.ensemble = pe;
  return model;
}

ModelFamily ladder_family() {
  const LadderSpec d;
  return {.name = "ladder",
          .summary = "a ladder network, its decoder and denoising costs a pseudo-ensemble (pens new ladder)",
          .settings = {{.name = "layers", .type = AttrType::Ints, .default_value = AttrValue(d.layers),
                        .doc = "widths, input first"},
                       {.name = "noise", .type = AttrType::Float, .default_value = AttrValue(d.noise),
                        .doc = "σ of the Gaussian noise on the input and every z", .range = AttrRange::at_least(0)},
                       {.name = "denoising", .type = AttrType::Floats, .default_value = AttrValue(d.denoising),
                        .doc = "each layer's denoising cost weight, input first"}},
          .build = [](const Attributes& s) {
            LadderSpec spec;
            spec.layers = s.get_ints("layers");
            spec.noise = s.get_float("noise");
            spec.denoising = s.get_floats("denoising");
            return build_ladder(spec);
          }};
}

}  // namespace pens
