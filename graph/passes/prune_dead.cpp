#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/reverse_graph.hpp>

#include "pens/graph/infer.h"
#include "pens/graph/pass.h"
#include "pens/graph/topology.h"
#include "pens/ops/ir/error.h"

namespace pens {

Graph run_passes(const Graph& g, const std::vector<std::unique_ptr<Pass>>& passes, int64_t batch) {
  Graph current = g;
  for (const auto& pass : passes) {
    current = within_pass(pass->name(), [&] {
      Graph next = pass->run(current);
      verify(next, batch);
      return next;
    });
  }
  return current;
}

namespace {
// Marks every vertex the search reaches.
struct MarkReached : boost::default_bfs_visitor {
  std::vector<char>* live;
  template <class G>
  void discover_vertex(NodeId v, const G&) const {
    (*live)[v] = 1;
  }
};
}  // namespace

Graph PruneDeadNodes::run(const Graph& in) const {
  const Graph::Topology::Impl& impl = in.topology().impl;
  std::vector<char> live(in.size(), 0);
  // Walk the reversed graph from every output and loss node: what it reaches is what
  // those nodes depend on.
  auto reversed = boost::make_reverse_graph(impl);
  std::vector<boost::default_color_type> colors(in.size(), boost::white_color);
  auto color_map = boost::make_iterator_property_map(colors.begin(),
                                                     boost::get(boost::vertex_index, impl));
  MarkReached visitor;
  visitor.live = &live;
  // A moving average's source lives too: the clean pass computes the batch statistics
  // the running statistics follow even when no loss reads the clean network.
  std::vector<char> root(in.size(), 0);
  for (NodeId v : in.nodes()) root[v] = in[v].has(kOutput) || in[v].has(kLoss);
  for (const MovingAverage& a : in.averages()) {
    root[in.at(a.source)] = root[in.at(a.param)] = 1;
  }
  for (NodeId v : in.nodes()) {
    if (root[v] && colors[v] == boost::white_color) {
      boost::breadth_first_visit(reversed, v, boost::visitor(visitor).color_map(color_map));
    }
  }
  return copy_subgraph(in, live);
}

}  // namespace pens
