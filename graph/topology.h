// The edges of a Graph as a Boost.Graph adjacency list, for the graph layer's .cpp files
// that run Boost's algorithms on them (graph.cpp, passes/prune_dead.cpp). Not installed
// and not included by any header: the rest of pens sees a graph through graph.h alone.
#pragma once

#include <boost/graph/adjacency_list.hpp>

#include "pens/graph/graph.h"

namespace pens {

// Vertex v is node v of the graph (vecS storage: descriptors are indices); an edge
// carries the input slot it feeds.
struct Graph::Topology {
  using Impl = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS,
                                     boost::no_property, Edge>;
  Impl impl;
};

}  // namespace pens
