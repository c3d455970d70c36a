#include "pens/graph/tree.h"

#include <algorithm>
#include <map>
#include <optional>

#include "pens/graph/infer.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/op.h"
#include "pens/ops/random.h"

namespace pens {

namespace {

// The cell's nodes `out` depends on, in the order `topological` lists them.
std::vector<NodeId> ancestors_in_order(const Graph& cell, const std::vector<NodeId>& topological, NodeId out) {
  const std::vector<char> seen = ancestors(cell, out);
  std::vector<NodeId> order;
  for (NodeId v : topological) {
    if (seen[v]) order.push_back(v);
  }
  return order;
}

// Copies cell subgraphs into one tree's graph. What does not depend on a port's input
// (parameters, constants, and nodes computed from them alone, such as a parameter's
// noise in a perturbed cell) is one node shared by every instance: computed, and drawn,
// once per tree. A stochastic node that is copied draws anew in each copy.
class Unroller {
 public:
  Unroller(const Graph& cell, Graph& g) : cell_(cell), g_(g), topological_(cell.topological_order()) {
    invariant_.assign(cell.size(), 0);
    for (NodeId v : topological_) {
      const std::vector<NodeId> inputs = cell.inputs(v);
      invariant_[v] = !is_input(cell[v]) &&
                      std::all_of(inputs.begin(), inputs.end(), [&](NodeId u) { return invariant_[u] != 0; });
    }
  }

  // An instance of the subgraph computing `out`, the cell inputs in `given` replaced by
  // the graph's nodes; its nodes are named "<cell name>@<suffix>".
  NodeId instance(NodeId out, const std::map<NodeId, NodeId>& given, const std::string& suffix) {
    std::map<NodeId, NodeId> copy = given;
    // A port's subgraph is the same at every level: found once per tree.
    auto [found, added] = subgraphs_.try_emplace(out);
    if (added) found->second = ancestors_in_order(cell_, topological_, out);
    for (NodeId v : found->second) {
      if (copy.count(v)) continue;
      const Node& n = cell_[v];
      if (is_input(n)) {
        fail("tree cell: '", cell_[out].name, "' reads input '", n.name, "', which is not the port it is built from");
      }
      std::vector<NodeId> inputs;
      for (NodeId u : cell_.inputs(v)) inputs.push_back(copy.at(u));
      if (invariant_[v]) {
        copy[v] = shared(v, inputs);
        continue;
      }
      const NodeId w = g_.add(n.op->name, inputs, n.attrs, n.name + "@" + suffix);
      Node& copied = g_.node(w);
      copied.layer = n.layer;
      copied.role = n.role;
      copied.noise = n.noise;
      copied.flags = n.flags & kFrozen;
      if (n.op->stochastic) {
        const auto stream = static_cast<uint64_t>(n.attrs.get_int("stream"));
        copied.attrs.set("stream", static_cast<int64_t>(mix64(stream ^ hash_name(suffix)) >> 1));
      }
      copy[v] = w;
    }
    return copy.at(out);
  }

 private:
  // The node of the tree's graph standing for invariant cell node v (made on first use).
  NodeId shared(NodeId v, const std::vector<NodeId>& inputs) {
    const Node& n = cell_[v];
    if (auto found = g_.find(n.name)) return *found;
    const NodeId w = g_.add(n.op->name, inputs, n.attrs, n.name);
    g_.node(w) = n;
    return w;
  }

  const Graph& cell_;
  Graph& g_;
  const std::vector<NodeId> topological_;
  std::vector<char> invariant_;  // by cell node: depends on no input
  std::map<NodeId, std::vector<NodeId>> subgraphs_;  // port -> its subgraph, in order
};

NodeId port(const Graph& cell, const std::string& name, const char* what) {
  const auto v = cell.find(name);
  if (!v) fail("tree cell: no node '", name, "' for the ", what, " port");
  return *v;
}

}  // namespace

void check_tree_cell(const Graph& cell, const TreePorts& ports) {
  const NodeId words = port(cell, ports.words, "words");
  if (ports.children.empty()) fail("tree cell: no child ports (a compose port reads at least one)");
  std::vector<NodeId> children;
  for (const std::string& name : ports.children) {
    if (std::count(ports.children.begin(), ports.children.end(), name) > 1) {
      fail("tree cell: '", name, "' is named twice as a child port");
    }
    children.push_back(port(cell, name, "child"));
  }
  const NodeId node = port(cell, ports.node, "node");
  const NodeId leaf = port(cell, ports.leaf, "leaf");
  const NodeId compose = port(cell, ports.compose, "compose");
  const NodeId scores = port(cell, ports.scores, "scores");
  const std::vector<ValueInfo> info = verify(cell);
  if (!is_input(cell[words]) || info[words].dtype != DType::Index || info[words].shape.rank != 1) {
    fail("tree cell: words port '", ports.words, "' must be an index input of shape [-1]");
  }
  std::vector<NodeId> vectors = children;
  vectors.push_back(node);
  for (NodeId v : vectors) {
    if (!is_input(cell[v]) || info[v].dtype != DType::Real || info[v].shape.rank != 2) {
      fail("tree cell: port '", cell[v].name, "' must be a real input of shape [-1, n]");
    }
  }
  const int64_t n = info[leaf].shape.rank == 2 ? info[leaf].shape[1] : -1;
  vectors.insert(vectors.end(), {leaf, compose});
  for (NodeId v : vectors) {
    if (info[v].shape.rank != 2 || info[v].shape[1] != n) {
      fail("tree cell: '", cell[v].name, "' is ", info[v].shape.str(), " but node vectors are [-1, ", n,
           "] (the leaf port's width)");
    }
  }
  if (info[scores].shape.rank != 2) fail("tree cell: scores port '", ports.scores, "' must be [-1, classes]");
  // Each port reads only the inputs it is built from (Unroller::instance says which one
  // does not).
  Graph scratch;
  Unroller u(cell, scratch);
  const NodeId w = scratch.input("w", Shape{kBatch}, DType::Index);
  const NodeId x = scratch.input("x", Shape{kBatch, n});
  std::map<NodeId, NodeId> given;
  for (NodeId c : children) given[c] = scratch.input(cat("child ", cell[c].name), Shape{kBatch, n});
  u.instance(leaf, {{words, w}}, "leaf");
  u.instance(compose, given, "compose");
  u.instance(scores, {{node, x}}, "scores");
}

int32_t TreeShape::add(std::span<const int32_t> children) {
  child_.insert(child_.end(), children.begin(), children.end());
  first_.push_back(static_cast<int32_t>(child_.size()));
  return static_cast<int32_t>(size() - 1);
}

int64_t TreeShape::arity() const {
  int64_t most = 0;
  for (int64_t i = 0; i < size(); ++i) most = std::max(most, static_cast<int64_t>(children(i).size()));
  return most;
}

TreeLevels tree_levels(const TreeShape& shape, int64_t max_children, const char* who) {
  const int64_t size = shape.size();
  if (size == 0) fail(who, ": an empty tree");
  std::vector<int32_t> height(static_cast<size_t>(size), 0);
  int32_t top = 0;
  for (int64_t i = 0; i < size; ++i) {
    const std::span<const int32_t> children = shape.children(i);
    if (static_cast<int64_t>(children.size()) > max_children) {
      fail(who, ": node ", i, " has ", children.size(), " children but the cell has ", max_children, " child port",
           max_children == 1 ? "" : "s");
    }
    int32_t& h = height[static_cast<size_t>(i)];
    for (int32_t c : children) {
      if (c < 0 || c >= i) fail(who, ": node ", i, " has child ", c, " (children come before their parent)");
      h = std::max(h, 1 + height[static_cast<size_t>(c)]);
    }
    top = std::max(top, h);
  }
  TreeLevels t;
  t.levels.resize(static_cast<size_t>(top) + 1);
  for (int64_t i = 0; i < size; ++i) t.levels[static_cast<size_t>(height[static_cast<size_t>(i)])].push_back(static_cast<int32_t>(i));
  t.row_of.assign(static_cast<size_t>(size), -1);
  int32_t next_row = 0;
  for (const std::vector<int32_t>& level : t.levels) {
    for (int32_t node : level) t.row_of[static_cast<size_t>(node)] = next_row++;
  }
  return t;
}

NodeId add_tree_loss(Graph& g, NodeId scores, NodeId labels, double scale) {
  const NodeId xent = g.add("softmax_xent", {scores, labels}, {}, "tree/xent");
  const NodeId sum = g.add("sum", {xent}, {}, "tree/xent_sum");
  const NodeId total = g.add("scale", {sum}, {{"factor", scale}}, "tree/loss");
  for (NodeId v : {xent, sum, total}) g.node(v).layer = "loss";
  g.set_flag(total, kLoss);
  return total;
}

UnrolledTree unroll_tree(const Graph& cell, const TreePorts& ports, const TreeShape& shape, const TreeLoss& loss) {
  const int64_t size = shape.size();
  // The rows of each level: leaves first, then height 1, 2, ...
  TreeLevels layout = tree_levels(shape, static_cast<int64_t>(ports.children.size()), "unroll_tree");
  const std::vector<std::vector<int32_t>>& levels = layout.levels;
  UnrolledTree t;
  t.row_of = std::move(layout.row_of);
  t.leaves = levels[0];

  Graph& g = t.graph;
  Unroller u(cell, g);
  const auto leaves = static_cast<int64_t>(levels[0].size());
  const NodeId words = g.input(t.words, Shape{leaves}, DType::Index);
  NodeId all = u.instance(cell.at(ports.leaf), {{cell.at(ports.words), words}}, "leaves");
  std::optional<NodeId> zero;  // one zero row, read in place of the children a node lacks
  int64_t rows = leaves;
  for (size_t h = 1; h < levels.size(); ++h) {
    const std::vector<int32_t>& level = levels[h];
    const auto width = static_cast<int64_t>(level.size());
    const std::string tag = cat("h", h);
    // Child port j gathers child j of each node; row `rows` (past the levels below) is
    // the zero row, added only to levels where some node has fewer children than ports.
    std::vector<std::vector<float>> child_rows(ports.children.size());
    bool lacking = false;
    for (int32_t node : level) {
      const std::span<const int32_t> children = shape.children(node);
      lacking = lacking || children.size() < ports.children.size();
      for (size_t j = 0; j < child_rows.size(); ++j) {
        child_rows[j].push_back(static_cast<float>(j < children.size() ? t.row_of[static_cast<size_t>(children[j])] : rows));
      }
    }
    NodeId from = all;
    if (lacking) {
      if (!zero) {
        const int64_t n = infer_values(g, kVerifyBatch)[all].shape[1];  // a child's may be a subspace
        zero = g.add("constant", {}, {{"shape", std::vector<int64_t>{1, n}}}, "tree/no_child");
        g.node(*zero).layer = "tree";
      }
      from = g.add("concat", {all, *zero}, {{"axis", int64_t{0}}}, cat("tree/vectors_and_zero@", tag));
      g.node(from).layer = "tree";
    }
    std::map<NodeId, NodeId> given;
    for (size_t j = 0; j < child_rows.size(); ++j) {
      // The binary cell's inputs keep their names of old ("tree/left@h1"): the graphs,
      // and the streams of their draws, are as before N-ary cells.
      const std::string which = child_rows.size() == 2 ? (j == 0 ? "left" : "right") : cat("child", j);
      const NodeId index = g.input(cat("tree/", which, "@", tag), Shape{width}, DType::Index);
      t.indices.emplace_back(g[index].name, std::move(child_rows[j]));
      const NodeId vectors = g.add("gather", {from, index}, {{"axis", int64_t{0}}}, cat("tree/", which, "_vectors@", tag));
      g.node(vectors).layer = "tree";
      given[cell.at(ports.children[j])] = vectors;
    }
    const NodeId c = u.instance(cell.at(ports.compose), given, tag);
    all = g.add("concat", {all, c}, {{"axis", int64_t{0}}}, cat("tree/vectors@", tag));
    g.node(all).layer = "tree";
    rows += width;
  }
  const NodeId scores = u.instance(cell.at(ports.scores), {{cell.at(ports.node), all}}, "tree");
  g.set_flag(scores, kOutput);
  t.scores = g[scores].name;
  if (!loss.labeled.empty()) {
    // Labels are fed in row order; when every node has one, the scores are read as they are.
    t.labeled = loss.labeled;
    std::sort(t.labeled.begin(), t.labeled.end(),
              [&](int32_t a, int32_t b) { return t.row_of.at(static_cast<size_t>(a)) < t.row_of.at(static_cast<size_t>(b)); });
    const auto labeled = static_cast<int64_t>(t.labeled.size());
    const NodeId labels = g.input(t.labels, Shape{labeled}, DType::Index);
    NodeId read = scores;
    if (labeled != size) {
      std::vector<float> rows;
      for (int32_t node : t.labeled) rows.push_back(static_cast<float>(t.row_of[static_cast<size_t>(node)]));
      const NodeId idx = g.input("tree/labeled_rows", Shape{labeled}, DType::Index);
      t.label_rows = {g[idx].name, std::move(rows)};
      read = g.add("gather", {scores, idx}, {{"axis", int64_t{0}}}, "tree/labeled_scores");
    }
    t.loss = g[add_tree_loss(g, read, labels, loss.scale)].name;
  }
  verify(g);
  return t;
}

}  // namespace pens
