#include "pens/graph/graph.h"

#include <algorithm>
#include <boost/graph/copy.hpp>
#include <boost/graph/depth_first_search.hpp>
#include <boost/graph/filtered_graph.hpp>

#include "pens/ops/ir/error.h"
#include "pens/ops/registry.h"

namespace pens {

Graph::Graph(Impl impl) : impl_(std::move(impl)) {
  for (NodeId v : nodes()) {
    if (!by_name_.emplace(impl_[v].name, v).second) {
      fail("duplicate node name '", impl_[v].name, "'");
    }
  }
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
  NodeId v = boost::add_vertex(std::move(node), impl_);
  by_name_.emplace(std::move(name), v);
  for (size_t slot = 0; slot < inputs.size(); ++slot) {
    boost::add_edge(inputs[slot], v, Edge{static_cast<int>(slot)}, impl_);
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
  const NodeId v = boost::add_vertex(std::move(node), impl_);
  by_name_.emplace(std::move(name), v);
  return v;
}

void Graph::set_inputs(NodeId v, const std::vector<NodeId>& inputs) {
  impl_[v].op->check_arity(impl_[v], inputs.size());
  for (NodeId in : inputs) {
    if (in >= size()) fail("node '", impl_[v].name, "': input refers to a node that does not exist");
  }
  boost::clear_in_edges(v, impl_);
  for (size_t slot = 0; slot < inputs.size(); ++slot) {
    boost::add_edge(inputs[slot], v, Edge{static_cast<int>(slot)}, impl_);
  }
}

std::vector<NodeId> Graph::inputs(NodeId v) const {
  std::vector<NodeId> out(boost::in_degree(v, impl_));
  for (auto [it, end] = boost::in_edges(v, impl_); it != end; ++it) {
    out[static_cast<size_t>(impl_[*it].slot)] = boost::source(*it, impl_);
  }
  return out;
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
  for (auto [it, end] = boost::out_edges(v, impl_); it != end; ++it) {
    out.push_back(boost::target(*it, impl_));
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
  if (!v) fail("no node named '", name, "'");
  return *v;
}

void Graph::rename(NodeId v, std::string name) {
  if (impl_[v].name == name) return;
  if (by_name_.count(name)) fail("duplicate node name '", name, "'");
  by_name_.erase(impl_[v].name);
  by_name_.emplace(name, v);
  if (auto body = probes_.extract(impl_[v].name)) {
    body.key() = name;
    probes_.insert(std::move(body));
  }
  for (MovingAverage& a : averages_) {
    if (a.source == impl_[v].name) a.source = name;
    if (a.param == impl_[v].name) a.param = name;
  }
  impl_[v].name = std::move(name);
}

const ProbeBody* Graph::probe(std::string_view node) const {
  auto it = probes_.find(node);
  return it == probes_.end() ? nullptr : &it->second;
}

std::vector<NodeId> Graph::nodes() const {
  std::vector<NodeId> out;
  out.reserve(size());
  for (auto [it, end] = boost::vertices(impl_); it != end; ++it) out.push_back(*it);
  return out;
}

std::vector<NodeId> Graph::nodes_with(NodeFlag f) const {
  std::vector<NodeId> out;
  for (NodeId v : nodes()) {
    if (impl_[v].has(f)) out.push_back(v);
  }
  return out;
}

namespace {
// A depth-first search that records vertices as they finish (reverse topological
// order) and stops at the first back edge, whose target lies on a cycle.
struct TopoVisitor : boost::default_dfs_visitor {
  std::vector<NodeId>* finished;
  void back_edge(Graph::Impl::edge_descriptor e, const Graph::Impl& g) const {
    const Node& from = g[boost::source(e, g)];
    const Node& to = g[boost::target(e, g)];
    fail("graph has a cycle through node '", to.name, "' (reached again from '", from.name,
         "')");
  }
  void finish_vertex(NodeId v, const Graph::Impl&) const { finished->push_back(v); }
};
}  // namespace

std::vector<NodeId> Graph::topological_order() const {
  std::vector<NodeId> order;
  order.reserve(size());
  TopoVisitor visitor;
  visitor.finished = &order;
  std::vector<boost::default_color_type> colors(size(), boost::white_color);
  auto color_map = boost::make_iterator_property_map(colors.begin(),
                                                     boost::get(boost::vertex_index, impl_));
  // Starting the searches from the last node makes the result the insertion order
  // whenever that order is already topological, so printed and saved graphs read in
  // the order they were written.
  for (NodeId v = size(); v-- > 0;) {
    if (colors[v] == boost::white_color) boost::depth_first_visit(impl_, v, visitor, color_map);
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

Graph copy_subgraph(const Graph& g, const std::vector<char>& keep, std::vector<NodeId>* old_to_new) {
  boost::filtered_graph<Graph::Impl, boost::keep_all, IsKept> kept(g.impl(), boost::keep_all{},
                                                                   IsKept{&keep});
  std::vector<NodeId> mapping(g.size(), static_cast<NodeId>(-1));
  Graph::Impl out;
  boost::copy_graph(kept, out,
                    boost::orig_to_copy(boost::make_iterator_property_map(
                        mapping.begin(), boost::get(boost::vertex_index, g.impl()))));
  if (old_to_new) {
    for (NodeId v = 0; v < g.size(); ++v) {
      if (!keep[v]) mapping[v] = static_cast<NodeId>(-1);
    }
    *old_to_new = std::move(mapping);
  }
  Graph copy(std::move(out));
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
