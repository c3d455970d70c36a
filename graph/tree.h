// Recursive networks over trees: a cell graph says how a leaf, an internal node and a
// node's classifier compute; unroll_tree() turns the cell and one tree into an ordinary
// pens graph, which the perturb pass, the tape and the printers then treat like any other.
//
// The cell is a pens graph with named ports (a model file's "tree" section):
//   words    index input [-1]:      the ids of a batch of leaves
//   leaf     node, from words:      their vectors [-1, n]
//   left     real input [-1, n]:    the first children of a batch of internal nodes
//   right    real input [-1, n]:    their second children
//   compose  node, from the children: the internal nodes' vectors [-1, n]
//   node     real input [-1, n]:    vectors of any nodes
//   scores   node, from node:       their class scores [-1, classes]
// Parameters are shared by every instance of every port (one set for all trees), and so
// is every node computed from parameters and constants alone (the noise of a perturbed
// cell's parameters: drawn once per tree). A stochastic node that reads a port is copied
// into each instance with a stream of its own, so each level draws anew.
//
// The child ports are a list, "left" and "right" by default: a cell with k of them takes
// nodes of up to k children (N-ary trees), child j of a node read by port j; a node with
// fewer children reads zero vectors in the ports past its last child (so a binary cell
// takes unary nodes, and a cell of three ports takes binary and ternary nodes alike).
//
// Unrolling batches by height: all leaves go through `leaf` at once; the internal nodes
// of height h (whose children are all lower) go through `compose` at once, their children
// gathered from the rows of the levels below; `scores` runs once on every node. A tree of
// height H becomes H + 2 instances of the cell's subgraphs, whatever its width.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pens/graph/graph.h"
#include "pens/graph/pseudo_ensemble.h"

namespace pens {

struct TreePorts {
  std::string words = "words", leaf = "leaf";
  std::vector<std::string> children = {"left", "right"};  // one port per child position
  std::string compose = "compose";
  std::string node = "node", scores = "scores";
  bool operator==(const TreePorts&) const = default;
};

// Checks the ports against the cell (kinds, dtypes, which port reads which); throws an
// Error naming the port.
void check_tree_cell(const Graph& cell, const TreePorts& ports);

// A tree's shape: each node's children in order (none for a leaf), children before their
// parents, the root last. Several trees one after another (a forest) unroll into one
// graph, the levels spanning them all. Nodes are added in order; tree_levels checks the
// order, so that a shape read from a file is refused with the node named.
class TreeShape {
 public:
  // Appends a node with these children; returns its index.
  int32_t add(std::span<const int32_t> children);
  int32_t add(std::initializer_list<int32_t> children) { return add(std::span(children.begin(), children.size())); }
  int64_t size() const { return static_cast<int64_t>(first_.size()) - 1; }
  std::span<const int32_t> children(int64_t node) const {
    const auto i = static_cast<size_t>(node);
    return std::span(child_).subspan(static_cast<size_t>(first_[i]), static_cast<size_t>(first_[i + 1] - first_[i]));
  }
  bool is_leaf(int64_t node) const { return children(node).empty(); }
  // The most children any node has.
  int64_t arity() const;
  bool operator==(const TreeShape&) const = default;

 private:
  std::vector<int32_t> first_{0};  // node i's children are child_[first_[i] .. first_[i + 1])
  std::vector<int32_t> child_;
};

struct TreeLoss {
  // Nodes that carry a label (the binary task leaves neutral nodes out); empty: none, and
  // the graph has no loss.
  std::vector<int32_t> labeled;
  double scale = 1.0;  // the loss is scale * sum of the labeled nodes' cross-entropies
};

// The graph of one tree and where its rows are.
struct UnrolledTree {
  Graph graph;
  std::vector<int32_t> row_of;   // node -> its row in the node vectors and the scores
  std::vector<int32_t> leaves;   // leaf nodes in row order (rows 0 .. L-1)
  std::vector<int32_t> labeled;  // labeled nodes in row order
  std::string words = "tree/words";    // [L] word ids of `leaves`, to feed
  std::string labels = "tree/labels";  // [labeled] classes of `labeled`, to feed
  std::string scores;                  // the scores node [nodes, classes], an output
  std::string loss;                    // "" when the tree carries no label
  // The other index inputs, with the values to feed: which rows each level gathers, and
  // (when some nodes carry no label) which rows the loss reads. Fixed by the tree's shape.
  std::vector<std::pair<std::string, std::vector<float>>> indices;
  std::pair<std::string, std::vector<float>> label_rows;  // name "" when the loss reads every row
  // A training graph's pseudo-ensemble penalties, whose λ constants follow the λ stages
  // (set on each tape: train/optim/schedule.h; the graph holds the unscaled λ).
  std::vector<PenaltyHandle> penalties;
  int64_t root_row() const { return row_of.back(); }  // of a single tree (its last node)
};

// A tree's nodes by height (leaves 0, a node one above its higher child), each level in
// node order, and each node's row when the levels are stacked in that order: how
// unroll_tree and TreeTape lay out a tree. Throws an Error (naming `who`) when a node's
// children do not come before it, or when it has more than `max_children` (the cell's
// child ports).
struct TreeLevels {
  std::vector<std::vector<int32_t>> levels;
  std::vector<int32_t> row_of;
};
TreeLevels tree_levels(const TreeShape& shape, int64_t max_children, const char* who);

// The loss of a tree's graph: scale · Σ softmax cross-entropy of `scores` rows [rows,
// classes] against `labels` [rows], as node "tree/loss" (flagged kLoss), layer "loss".
NodeId add_tree_loss(Graph& g, NodeId scores, NodeId labels, double scale);

// Builds the graph of one tree (verified).
UnrolledTree unroll_tree(const Graph& cell, const TreePorts& ports, const TreeShape& shape, const TreeLoss& loss = {});

}  // namespace pens
