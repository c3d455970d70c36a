#include "pens/models/ctn.h"
#include "pens/models/family.h"

#include <cmath>

#include "pens/graph/noise.h"
#include "pens/ops/ir/error.h"

namespace pens {

Model build_ctn(const CtnSpec& spec) {
  const int64_t n = spec.dim;
  if (spec.vocabulary < 1) fail("ctn: vocabulary must be >= 1 (the <unk> row at least), got ", spec.vocabulary);
  if (n < 1) fail("ctn: dim must be >= 1, got ", n);
  if (spec.classes < 2) fail("ctn: classes must be >= 2, got ", spec.classes);
  if (spec.tensor != "compact" && spec.tensor != "full") fail("ctn: tensor must be compact or full, got '", spec.tensor, "'");
  if (spec.subspace < 0 || spec.subspace > n) fail("ctn: subspace keeps 0 (none) to ", n, " dimensions, got ", spec.subspace);
  if (spec.init != "scaled" && spec.init != "authors") {
    fail("ctn: init must be scaled or authors, got '", spec.init, "'");
  }
  if (spec.subspace > 0 && spec.tensor == "full") {
    fail("ctn: subspace sampling slices T along [v1; v2], which the full tensor mixes; use tensor compact");
  }
  if (!(spec.fuzz >= 0) || !(spec.activation_noise >= 0) || !(spec.word_std >= 0)) {
    fail("ctn: fuzz, activation_noise and word_std must be >= 0");
  }
  Model model;
  Graph& g = model.graph;
  const bool full = spec.tensor == "full";
  const int64_t t_in = full ? 2 * n : n;
  const double root_n = std::sqrt(static_cast<double>(n));
  const NodeId E = g.param("E", Shape{spec.vocabulary, n}, {{"init", "normal"}, {"std", spec.word_std}});
  NodeId T, Ml, Mr, C;
  if (spec.init == "authors") {
    T = g.param("T", Shape{n, t_in, t_in}, {{"init", "uniform"}, {"limit", 0.5 / static_cast<double>(t_in)}});
    const Attributes near_identity{{"init", "uniform"}, {"limit", 0.5 / root_n}, {"diagonal", 1.0}};
    Ml = g.param("Ml", Shape{n, n}, near_identity);
    Mr = g.param("Mr", Shape{n, n}, near_identity);
    C = g.param("C", Shape{n, spec.classes}, {{"init", "uniform"}, {"limit", 1.0 / root_n}});
  } else {
    // Scales that keep pre-activations near unit size at the start: the tensor term sums
    // t_in² products, the matrix terms n each.
    T = g.param("T", Shape{n, t_in, t_in}, {{"init", "normal"}, {"std", 0.5 / static_cast<double>(t_in)}});
    const double m_std = 1.0 / std::sqrt(2.0 * static_cast<double>(n));
    Ml = g.param("Ml", Shape{n, n}, {{"init", "normal"}, {"std", m_std}});
    Mr = g.param("Mr", Shape{n, n}, {{"init", "normal"}, {"std", m_std}});
    C = g.param("C", Shape{n, spec.classes}, {{"init", "normal"}, {"std", 1.0 / root_n}});
  }
  const NodeId m = g.param("m", Shape{n}, {{"init", "zeros"}});
  const NodeId c = g.param("c", Shape{spec.classes}, {{"init", "zeros"}});

  const NodeId words = g.input("words", Shape{kBatch}, DType::Index);
  const NodeId lookup = g.add("embedding", {E, words}, {}, spec.leaf_tanh ? "lookup" : "leaf");
  const NodeId leaf = spec.leaf_tanh ? g.add("tanh", {lookup}, {}, "leaf") : lookup;
  const NodeId left = g.input("left", Shape{kBatch, n});
  const NodeId right = g.input("right", Shape{kBatch, n});
  NodeId tensor;
  if (full) {
    const NodeId both = g.add("concat", {left, right}, {{"axis", int64_t{1}}}, "children");
    tensor = g.add("bilinear", {both, T, both}, {}, "tensor");
  } else {
    tensor = g.add("bilinear", {left, T, right}, {}, "tensor");
  }
  const NodeId from_left = g.add("affine", {left, Ml, m}, {}, "from_left");
  const NodeId from_right = g.add("matmul", {right, Mr}, {}, "from_right");
  const NodeId linear = g.add("add", {from_left, from_right}, {}, "linear");
  const NodeId pre = g.add("add", {tensor, linear}, {}, "pre");
  const NodeId compose = g.add("tanh", {pre}, {}, "compose");
  const NodeId node = g.input("node", Shape{kBatch, n});
  const NodeId scores = g.add("affine", {node, C, c}, {}, "scores");
  g.set_flag(scores, kOutput);
  for (NodeId v : {words, lookup, leaf}) g.node(v).layer = "leaf";
  for (NodeId v : {left, right, tensor, from_left, from_right, linear, pre, compose}) g.node(v).layer = "compose";
  if (full) g.node(g.at("children")).layer = "compose";
  for (NodeId v : {node, scores}) g.node(v).layer = "scores";

  // Subspace first, then fuzz: a child fuzzes only what it keeps (the same distribution
  // as fuzzing everything and slicing, at a fraction of the draws).
  const std::vector<std::pair<NodeId, std::vector<int64_t>>> latent_axes = {
      {E, {1}}, {T, {0, 1, 2}}, {Ml, {0, 1}}, {Mr, {0, 1}}, {m, {0}}, {C, {0}}, {c, {}}};
  for (const auto& [p, axes] : latent_axes) {
    if (spec.subspace > 0 && !axes.empty()) {
      add_noise(g, p, "subspace", {{"group", "latent"}, {"keep", spec.subspace}, {"axes", axes}});
    }
    if (spec.fuzz > 0) add_noise(g, p, "fuzz", {{"sigma", spec.fuzz}});
  }
  if (spec.activation_noise > 0) {
    add_noise(g, leaf, "gaussian", {{"sigma", spec.activation_noise}});
    add_noise(g, compose, "gaussian", {{"sigma", spec.activation_noise}});
  }
  model.tree = TreePorts{};
  if (spec.fuzz > 0 || spec.subspace > 0 || spec.activation_noise > 0) {
    PseudoEnsembleSpec pe;
    pe.children = 1;
    pe.loss_on = "child";
    model.ensemble = pe;
  }
  model.metadata["description"] =
      cat("compact tensor network (", spec.tensor, " tensor), n = ", n, ", ", spec.classes, " classes, ",
          spec.vocabulary, " words; fuzz ", spec.fuzz, ", subspace ", spec.subspace, ", activation noise ",
          spec.activation_noise, spec.leaf_tanh ? "; tanh at the leaves" : "", "; init ", spec.init);
  return model;
}

ModelFamily ctn_family() {
  const CtnSpec d;
  const auto number = [](const char* name, double value, AttrRange range, const char* doc) {
    return AttrSpec{.name = name, .type = AttrType::Float, .default_value = AttrValue(value), .doc = doc, .range = range};
  };
  const auto count = [](const char* name, int64_t value, AttrRange range, const char* doc) {
    return AttrSpec{.name = name, .type = AttrType::Int, .default_value = AttrValue(value), .doc = doc, .range = range};
  };
  return {.name = "ctn",
          .summary = "the compact tensor network over sentiment trees (pens new ctn)",
          .settings = {{.name = "vocabulary", .type = AttrType::Int, .required = true, .doc = "rows of E, <unk> included",
                        .range = AttrRange::at_least(1)},
                       count("dim", d.dim, AttrRange::at_least(1), "n, the node vectors' width"),
                       count("classes", d.classes, AttrRange::at_least(2), "5 (fine) or 2 (binary)"),
                       {.name = "tensor", .type = AttrType::String, .default_value = AttrValue(d.tensor),
                        .doc = "compact or full"},
                       number("fuzz", 0, AttrRange::at_least(0), "weight fuzzing σ on E, T, M, C"),
                       count("subspace", 0, AttrRange::at_least(0), "latent dimensions kept per tree (0: none)"),
                       number("activation_noise", 0, AttrRange::at_least(0), "Gaussian σ on every node vector"),
                       count("leaf_tanh", 0, AttrRange::from_to(0, 1), "1: leaf vectors are tanh(E[word])"),
                       {.name = "init", .type = AttrType::String, .default_value = AttrValue(d.init),
                        .doc = "scaled or authors"},
                       number("word_std", d.word_std, AttrRange::at_least(0), "E's initial standard deviation")},
          .build = [](const Attributes& s) {
            return build_ctn({.vocabulary = s.get_int("vocabulary"),
                              .dim = s.get_int("dim"),
                              .classes = s.get_int("classes"),
                              .tensor = s.get_string("tensor"),
                              .fuzz = s.get_float("fuzz"),
                              .subspace = s.get_int("subspace"),
                              .activation_noise = s.get_float("activation_noise"),
                              .leaf_tanh = s.get_int("leaf_tanh") != 0,
                              .init = s.get_string("init"),
                              .word_std = s.get_float("word_std")});
          }};
}

}  // namespace pens
