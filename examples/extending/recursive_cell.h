// A model family defined outside pens: the plain recursive neural network of Socher et al.
// (2011) as a tree cell, a node's vector tanh([child0; child1] W + b) in place of the CTN's
// tensor, with weight fuzzing as its noise. With `arity` k > 2 it takes nodes of up to k
// children (N-ary trees; a node with fewer reads zeros for the rest). Register it once
// at start-up:
//   pens::ModelFamilyRegistry::register_global(recursive_family());
// then pens::build_model("recursive", {{"vocabulary", 9}}) makes a model that a tree
// config trains.
#pragma once

#include <vector>

#include "pens/graph/noise.h"
#include "pens/graph/tree.h"
#include "pens/models/family.h"

inline pens::Model build_recursive(const pens::Attributes& s) {
  using namespace pens;
  const int64_t n = s.get_int("dim"), classes = s.get_int("classes"), arity = s.get_int("arity");
  Model model;
  Graph& g = model.graph;
  const Attributes small{{"init", "normal"}, {"std", 0.3}};
  const NodeId E = g.param("table", Shape{s.get_int("vocabulary"), n}, small);
  const NodeId W = g.param("W", Shape{arity * n, n}, small);
  const NodeId b = g.param("b", Shape{n}, {{"init", "zeros"}});
  const NodeId C = g.param("C", Shape{n, classes}, small);
  const NodeId c = g.param("c", Shape{classes}, {{"init", "zeros"}});
  // The ports of graph/tree.h: leaves from words, internal nodes from their children (a
  // port per child), scores from any node.
  const NodeId words = g.input("words", Shape{kBatch}, DType::Index);
  g.add("embedding", {E, words}, {}, "leaf");
  TreePorts ports;
  ports.children.clear();
  std::vector<NodeId> children;
  for (int64_t j = 0; j < arity; ++j) {
    ports.children.push_back(cat("child", j));
    children.push_back(g.input(ports.children.back(), Shape{kBatch, n}));
  }
  const NodeId joined = g.add("concat", children, {{"axis", int64_t{1}}}, "children");
  g.add("tanh", {g.add("affine", {joined, W, b}, {}, "pre")}, {}, "compose");
  const NodeId node = g.input("node", Shape{kBatch, n});
  g.set_flag(g.add("affine", {node, C, c}, {}, "scores"), kOutput);
  model.tree = ports;
  if (const double sigma = s.get_float("fuzz"); sigma > 0) {
    for (NodeId p : {E, W, C}) add_noise(g, p, "fuzz", {{"sigma", sigma}});
    // One noisy child per tree carries the loss (as the CTN's: graph/pseudo_ensemble.h).
    PseudoEnsembleSpec one_child;
    one_child.children = 1;
    one_child.loss_on = "child";
    model.ensemble = one_child;
  }
  return model;
}

inline pens::ModelFamily recursive_family() {
  using pens::AttrSpec, pens::AttrType, pens::AttrValue, pens::AttrRange;
  return {.name = "recursive",
          .summary = "the plain recursive network over trees, tanh([child0; child1; ...] W + b)",
          .settings = {{.name = "vocabulary", .type = AttrType::Int, .required = true,
                        .doc = "rows of the word table, <unk> included", .range = AttrRange::at_least(1)},
                       {.name = "dim", .type = AttrType::Int, .default_value = AttrValue(int64_t{8}),
                        .doc = "the node vectors' width", .range = AttrRange::at_least(1)},
                       {.name = "classes", .type = AttrType::Int, .default_value = AttrValue(int64_t{5}),
                        .doc = "5 (fine) or 2 (binary)", .range = AttrRange::at_least(2)},
                       {.name = "arity", .type = AttrType::Int, .default_value = AttrValue(int64_t{2}),
                        .doc = "the most children a node may have", .range = AttrRange::at_least(1)},
                       {.name = "fuzz", .type = AttrType::Float, .default_value = AttrValue(0.0),
                        .doc = "weight fuzzing σ on the table, W and C", .range = AttrRange::at_least(0)}},
          .build = build_recursive};
}
