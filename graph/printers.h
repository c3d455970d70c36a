// Readable views of a graph, for debugging: one line per node in topological order,
// and Graphviz DOT.
#pragma once

#include <ostream>
#include <string>

#include "pens/graph/graph.h"

namespace pens {

// Shapes are printed with the batch dimension bound to `batch`; when the graph does not
// pass shape inference the text says so and prints the nodes without shapes.
std::string to_text(const Graph& g, int64_t batch = 1);
void write_dot(std::ostream& out, const Graph& g, int64_t batch = 1);

}  // namespace pens
