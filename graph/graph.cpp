#include "pens/graph/graph.h"

#include <algorithm>
#include <boost/graph/copy.hpp>
#include <boost/graph/depth_first_search.hpp>
#include <boost/graph/filtered_graph.hpp>

#include "pens/graph/topology.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/ir/suggest.h"
#include "pens/ops/registry.h"

namespace pens {

Graph::Graph() : topology_(std::make_unique<Topology>()) {}
Graph::Graph(const Graph& other)
    : nodes_(other.nodes_),
      topology_(std::make_unique<Topology>(other.topology())),
      by_name_(other.by_name_),
      next_auto_name_(other.next_auto_name_),
      probes_(other.probes_),
      averages_(other.averages_) {}
Graph::Graph(Graph&& other) noexcept = default;
Graph& Graph::operator=(const Graph& other) {
  if (this != &other) *this = Graph(other);
  return *this;
}
Graph& Graph::operator=(Graph&& other) noexcept = default;
Graph::~Graph() = default;

const Graph::Topology& Graph::topology() const {
  static const Topology no_edges;
  return topology_ ? *topology_ : no_edges;
}

Graph::Topology& Graph::edges() {
  if (!topology_) topology_ = std::make_unique<Topology>();
  return *topology_;
}

std::string Graph::fresh_name(std::string_view op) {
  std::string name;
  do {
    name = cat(op, "_", next_auto_name_++);
  } while (by_name_.count(name));
  return name;
}

NodeId Graph::add(std::string_view op_name, const std::vector<NodeId>& inputs,
                  Attributes attrs, std::string name) {
  const OpDef& op = OpRegistry::global().at(op_name);
  if (name.empty()) name = fresh_name(op_name);
  if (by_name_.count(name)) fail_at(name, "duplicate node name '", name, "'");
  Node node;
  node.name = name;
  node.op = &op;
  op.check_arity(node, inputs.size());
  op.normalize_attrs(attrs, name);
  node.attrs = std::move(attrs);
  for (NodeId in : inputs) {
    if (in >= size()) fail("node '", name, "': input refers to a node that does not exist");
  }
  Topology::Impl& impl = edges().impl;
  const NodeId v = boost::add_vertex(impl);
  nodes_.push_back(std::move(node));
  by_name_.emplace(std::move(name), v);
  for (size_t slot = 0; slot < inputs.size(); ++slot) {
    boost::add_edge(inputs[slot], v, Edge{static_cast<int>(slot)}, impl);
  }
  return v;
}

NodeId Graph::input(std::string name, Shape shape, DType dtype) {
  return add("input", {},
             {{"shape", shape.to_vector()},
              {"dtype", std::string(dtype_name(dtype))}},
             std::move(name));
}

NodeId Graph::param(std::string name, Shape shape, Attributes init) {
  init.set("shape", shape.to_vector());
  return add("parameter", {}, std::move(init), std::move(name));
}

NodeId Graph::add_unwired(std::string_view op_name, Attributes attrs, std::string name) {
  const OpDef& op = OpRegistry::global().at(op_name);
  if (name.empty()) name = fresh_name(op_name);
  if (by_name_.count(name)) fail_at(name, "duplicate node name '", name, "'");
  op.normalize_attrs(attrs, name);
  Node node;
  node.name = name;
  node.op = &op;
  node.attrs = std::move(attrs);
  const NodeId v = boost::add_vertex(edges().impl);
  nodes_.push_back(std::move(node));
  by_name_.emplace(std::move(name), v);
  return v;
}

void Graph::set_inputs(NodeId v, const std::vector<NodeId>& inputs) {
  nodes_[v].op->check_arity(nodes_[v], inputs.size());
  for (NodeId in : inputs) {
    if (in >= size()) fail("node '", nodes_[v].name, "': input refers to a node that does not exist");
  }
  Topology::Impl& impl = edges().impl;
  boost::clear_in_edges(v, impl);
  for (size_t slot = 0; slot < inputs.size(); ++slot) {
    boost::add_edge(inputs[slot], v, Edge{static_cast<int>(slot)}, impl);
  }
}

std::vector<NodeId> Graph::inputs(NodeId v) const {
  const Topology::Impl& impl = topology().impl;
  std::vector<NodeId> out(boost::in_degree(v, impl));
  for (auto [it, end] = boost::in_edges(v, impl); it != end; ++it) {
    out[static_cast<size_t>(impl[*it].slot)] = boost::source(*it, impl);
  }
  return out;
}

void Graph::input_slots(NodeId v, std::vector<int>& slots) const {
  const Topology::Impl& impl = topology().impl;
  slots.clear();
  for (auto [it, end] = boost::in_edges(v, impl); it != end; ++it) slots.push_back(impl[*it].slot);
}

void Graph::replace_uses(NodeId from, NodeId to) {
  for (NodeId consumer : consumers(from)) {
    std::vector<NodeId> ins = inputs(consumer);
    std::replace(ins.begin(), ins.end(), from, to);
    set_inputs(consumer, ins);
  }
}

std::vector<NodeId> Graph::consumers(NodeId v) const {
  std::vector<NodeId> out;
  const Topology::Impl& impl = topology().impl;
  for (auto [it, end] = boost::out_edges(v, impl); it != end; ++it) {
    out.push_back(boost::target(*it, impl));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::optional<NodeId> Graph::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

NodeId Graph::at(std::string_view name) const {
  auto v = find(name);
  if (!v) fail(no_node_named(name));
  return *v;
}

bool Graph::declares_batch() const {
  for (const Node& node : nodes_) {
    if (!node.attrs.has("shape")) continue;
    for (int64_t d : node.attrs.get_ints("shape")) {
      if (d == kBatch) return true;
    }
  }
  return false;
}

std::string Graph::no_node_named(std::string_view name) const {
  std::vector<std::string> names;
  for (const Node& node : nodes_) names.push_back(node.name);
  return cat("no node named '", name, "'", unknown_name_hint(name, names, "nodes", 12));
}

void Graph::rename(NodeId v, std::string name) {
  Node& node = nodes_[v];
  if (node.name == name) return;
  if (by_name_.count(name)) fail("duplicate node name '", name, "'");
  by_name_.erase(node.name);
  by_name_.emplace(name, v);
  if (auto body = probes_.extract(node.name)) {
    body.key() = name;
    probes_.insert(std::move(body));
  }
  for (MovingAverage& a : averages_) {
    if (a.source == node.name) a.source = name;
    if (a.param == node.name) a.param = name;
  }
  node.name = std::move(name);
}

const ProbeBody* Graph::probe(std::string_view node) const {
  auto it = probes_.find(node);
  return it == probes_.end() ? nullptr : &it->second;
}

std::vector<NodeId> Graph::nodes() const {
  std::vector<NodeId> out(size());
  for (NodeId v = 0; v < out.size(); ++v) out[v] = v;
  return out;
}

std::vector<NodeId> Graph::nodes_with(NodeFlag f) const {
  std::vector<NodeId> out;
  for (NodeId v = 0; v < size(); ++v) {
    if (nodes_[v].has(f)) out.push_back(v);
  }
  return out;
}

namespace {
// A depth-first search that records vertices as they finish (reverse topological
// order) and stops at the first back edge, whose target lies on a cycle.
struct TopoVisitor : boost::default_dfs_visitor {
  const Graph* graph;
  std::vector<NodeId>* finished;
  void back_edge(Graph::Topology::Impl::edge_descriptor e, const Graph::Topology::Impl& g) const {
    const Node& from = (*graph)[boost::source(e, g)];
    const Node& to = (*graph)[boost::target(e, g)];
    fail("graph has a cycle through node '", to.name, "' (reached again from '", from.name,
         "')");
  }
  void finish_vertex(NodeId v, const Graph::Topology::Impl&) const { finished->push_back(v); }
};
}  // namespace

std::vector<NodeId> Graph::topological_order() const {
  std::vector<NodeId> order;
  order.reserve(size());
  TopoVisitor visitor;
  visitor.graph = this;
  visitor.finished = &order;
  const Topology::Impl& impl = topology().impl;
  std::vector<boost::default_color_type> colors(size(), boost::white_color);
  auto color_map = boost::make_iterator_property_map(colors.begin(),
                                                     boost::get(boost::vertex_index, impl));
  // Starting the searches from the last node makes the result the insertion order
  // whenever that order is already topological, so printed and saved graphs read in
  // the order they were written.
  for (NodeId v = size(); v-- > 0;) {
    if (colors[v] == boost::white_color) boost::depth_first_visit(impl, v, visitor, color_map);
  }
  std::reverse(order.begin(), order.end());
  return order;
}

namespace {
// filtered_graph wants a default-constructible, assignable vertex predicate.
struct IsKept {
  const std::vector<char>* keep = nullptr;
  bool operator()(NodeId v) const { return (*keep)[v] != 0; }
};
}  // namespace

std::vector<char> ancestors(const Graph& g, NodeId out) {
  std::vector<char> seen(g.size(), 0);
  std::vector<NodeId> stack{out};
  seen[out] = 1;
  while (!stack.empty()) {
    const NodeId v = stack.back();
    stack.pop_back();
    for (NodeId u : g.inputs(v)) {
      if (!seen[u]) {
        seen[u] = 1;
        stack.push_back(u);
      }
    }
  }
  return seen;
}

Graph copy_subgraph(const Graph& g, const std::vector<char>& keep, std::vector<NodeId>* old_to_new) {
  using Impl = Graph::Topology::Impl;
  const Impl& in = g.topology().impl;
  boost::filtered_graph<Impl, boost::keep_all, IsKept> kept(in, boost::keep_all{}, IsKept{&keep});
  std::vector<NodeId> mapping(g.size(), static_cast<NodeId>(-1));
  Graph copy;
  boost::copy_graph(kept, copy.edges().impl,
                    boost::orig_to_copy(boost::make_iterator_property_map(
                        mapping.begin(), boost::get(boost::vertex_index, in))));
  // copy_graph numbers the kept vertices in order; the nodes follow them.
  for (NodeId v = 0; v < g.size(); ++v) {
    if (!keep[v]) {
      mapping[v] = static_cast<NodeId>(-1);
      continue;
    }
    copy.nodes_.push_back(g[v]);
    if (!copy.by_name_.emplace(g[v].name, mapping[v]).second) {
      fail("duplicate node name '", g[v].name, "'");
    }
  }
  if (old_to_new) *old_to_new = std::move(mapping);
  for (const auto& [name, body] : g.probes()) {
    if (auto v = copy.find(name)) copy.set_probe(*v, body);
  }
  for (const MovingAverage& a : g.averages()) {
    if (copy.find(a.source) && copy.find(a.param)) copy.add_average(a);
  }
  return copy;
}

bool is_input(const Node& n) { return n.op->name == "input"; }
bool is_param(const Node& n) { return n.op->name == "parameter"; }
bool is_constant(const Node& n) { return n.op->name == "constant"; }
bool of_batch_statistic(const Graph& g, const MovingAverage& a) { return !is_param(g[g.at(a.source)]); }

}  // namespace pens
