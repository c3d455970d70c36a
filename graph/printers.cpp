#include "graph/printers.h"

#include <boost/graph/graphviz.hpp>
#include <iomanip>
#include <sstream>

#include "graph/error.h"
#include "graph/infer.h"
#include "ops/op.h"

namespace pens {

namespace {

std::string noise_str(const Node& n) {
  std::string out;
  for (const NoiseAnnotation& a : n.noise) {
    if (!out.empty()) out += " ";
    out += a.kind + "(" + a.params.str() + ")";
  }
  return out;
}

std::string flags_str(const Node& n) {
  std::string out;
  if (n.has(kOutput)) out += " output";
  if (n.has(kLoss)) out += " loss";
  if (n.has(kFrozen)) out += " frozen";
  return out;
}

// Attributes worth showing inline: everything but a leaf's shape (printed as its value
// shape anyway) and long constant payloads.
std::string attrs_str(const Node& n) {
  std::string out;
  for (const auto& [k, v] : n.attrs.items()) {
    if (k == "shape" || k == "values") continue;
    if (!out.empty()) out += ", ";
    out += k + "=" + attr_to_string(v);
  }
  return out;
}

std::optional<std::vector<ValueInfo>> try_infer(const Graph& g, int64_t batch,
                                                std::string* error) {
  try {
    return infer_values(g, batch);
  } catch (const Error& e) {
    *error = e.what();
    return std::nullopt;
  }
}

}  // namespace

std::string to_text(const Graph& g, int64_t batch) {
  std::string error;
  auto values = try_infer(g, batch, &error);
  std::vector<NodeId> order;
  try {
    order = g.topological_order();
  } catch (const Error& e) {
    order = g.nodes();
    error = e.what();
  }
  std::ostringstream out;
  out << "graph: " << g.size() << " nodes, batch " << batch << "\n";
  if (!error.empty()) out << "  (shape inference failed: " << error << ")\n";
  size_t width = 0;
  for (NodeId v : order) width = std::max(width, g[v].name.size());
  for (NodeId v : order) {
    const Node& n = g[v];
    std::string call = n.op->name + "(";
    bool first = true;
    for (NodeId u : g.inputs(v)) {
      call += (first ? "%" : ", %") + g[u].name;
      first = false;
    }
    std::string attrs = attrs_str(n);
    if (!attrs.empty()) call += (first ? "" : "; ") + attrs;
    call += ")";
    out << "  %" << std::left << std::setw(static_cast<int>(width)) << n.name << " = " << call;
    if (values) {
      out << "  " << (*values)[v].shape.str();
      if ((*values)[v].dtype == DType::Index) out << " index";
    }
    if (!n.layer.empty()) out << "  layer=" << n.layer;
    if (!n.noise.empty()) out << "  noise=" << noise_str(n);
    out << flags_str(n) << "\n";
  }
  return out.str();
}

namespace {
std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}
}  // namespace

void write_dot(std::ostream& out, const Graph& g, int64_t batch) {
  std::string error;
  auto values = try_infer(g, batch, &error);
  const Graph::Impl& impl = g.impl();
  auto vertex_writer = [&](std::ostream& os, NodeId v) {
    const Node& n = impl[v];
    std::string label = n.name + "\\n" + n.op->name;
    if (values) label += " " + (*values)[v].shape.str();
    if (!n.noise.empty()) label += "\\nnoise: " + dot_escape(noise_str(n));
    std::string style = is_param(n)   ? "shape=box, style=filled, fillcolor=lightyellow"
                        : is_input(n) ? "shape=box, style=filled, fillcolor=lightblue"
                        : n.has(kLoss) ? "shape=ellipse, style=filled, fillcolor=salmon"
                        : n.op->stochastic ? "shape=ellipse, style=filled, fillcolor=plum"
                                           : "shape=ellipse";
    os << "[label=\"" << dot_escape(label) << "\", " << style << "]";
  };
  auto edge_writer = [&](std::ostream& os, Graph::Impl::edge_descriptor e) {
    const Node& target = impl[boost::target(e, impl)];
    if (target.op->inputs.size() > 1 || target.op->variadic) {
      os << "[label=\"" << dot_escape(target.op->slot(static_cast<size_t>(impl[e].slot)).name)
         << "\", fontsize=9]";
    }
  };
  auto graph_writer = [](std::ostream& os) { os << "rankdir=TB;\nnode [fontname=\"Helvetica\"];\n"; };
  boost::write_graphviz(out, impl, vertex_writer, edge_writer, graph_writer);
}

}  // namespace pens
