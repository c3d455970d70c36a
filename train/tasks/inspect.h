// The graph a model trains on, built for looking at it: the pseudo-ensemble's training
// graph (children, taps and penalties), the parent as written, or the graph of one tree of
// a tree model; and its renderings as `pens inspect` prints them. Shared by the CLI
// (inspect, gradcheck) and the Python package.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "pens/graph/pseudo_ensemble.h"
#include "pens/serialization/model.h"

namespace pens {

struct BuildOptions {
  int64_t batch = 8;                         // the batch shapes are shown for
  std::optional<int64_t> children;           // default: the model's spec
  std::optional<std::string> pairing;        // override the spec's pairing
  std::optional<std::string> penalty_kind;   // override every penalty's kind
  // Rows 0..L-1 of a batch carry labels; default: half the batch when a penalty asks for
  // labeled or unlabeled rows, else all.
  std::optional<int64_t> labeled_rows;
  bool parent = false;                       // the parent graph as written
  std::optional<std::string> tree;           // tree models: this tree's graph, '(3 (2 a) (4 b))'
  std::string tree_source = "tree";          // names the tree text in errors
};

struct BuiltGraph {
  Graph graph;
  int64_t batch = 8;
  std::optional<PseudoEnsemble> ensemble;  // set when the graph is a pseudo-ensemble's
};

BuiltGraph build_graph(const Model& model, const BuildOptions& options = {});

// `pens inspect`'s three formats: the graph and its tap table as text, Graphviz DOT, and
// JSON (nodes with shapes, dtypes, noise and flags; taps with their penalties).
std::string inspect_text(const BuiltGraph& built);
std::string inspect_dot(const BuiltGraph& built);
nlohmann::json inspect_json(const BuiltGraph& built);

}  // namespace pens
