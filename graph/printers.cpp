#include "pens/graph/printers.h"

#include <iomanip>
#include <map>
#include <sstream>

#include "pens/graph/infer.h"
#include "pens/graph/noise.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/op.h"

namespace pens {

namespace {

std::string noise_str(const Node& n) {
  std::string out;
  for (const NoiseAnnotation& a : n.noise) {
    if (!out.empty()) out += " ";
    out += a.kind + "(" + a.params.str() + ")";
    if (!a.children.empty()) {
      out += "@";
      for (size_t i = 0; i < a.children.size(); ++i) out += cat(i ? "+" : "", a.children[i]);
    }
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
// shape anyway) and long constant payloads, which show as their count (a constant with
// listed values ignores its single 'value', so that is left out too).
std::string attrs_str(const Node& n) {
  const bool listed = n.attrs.has("values");
  std::string out;
  for (const auto& [k, v] : n.attrs.items()) {
    if (k == "shape" || (listed && k == "value")) continue;
    if (!out.empty()) out += ", ";
    out += k + "=" + (k == "values" ? cat(n.attrs.get_floats("values").size(), " listed") : attr_to_string(v));
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
  out << "graph: " << g.size() << " nodes" << (g.declares_batch() ? cat(", batch ", batch) : "") << "\n";
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
  for (const MovingAverage& a : g.averages()) {
    out << "  moving average: %" << a.param << " <- " << a.decay << " * %" << a.param << " + " << 1 - a.decay
        << " * %" << a.source << " after each update";
    // In a training graph a child's average names the child's copy; inference reads the
    // parent's node of the same name.
    std::string read_for = a.source;
    if (const std::string prefix = child_prefix(static_cast<int>(a.child)); a.child > 0 && read_for.starts_with(prefix)) {
      read_for.erase(0, prefix.size());
    }
    out << (a.at_inference ? "; read for %" + read_for + " at inference" : "") << "\n";
  }
  // Probe bodies after the graph, indented: what each probe's gradients are taken of.
  for (const auto& [name, body] : g.probes()) {
    out << "\nprobe %" << name << ": " << body.kind << "(" << body.params.str() << ") of child " << body.child;
    if (!body.graph) {
      out << ", no body yet\n";
      continue;
    }
    out << ", from gradients of this body's objective with respect to its input %" << name << ":\n";
    std::istringstream lines(to_text(*body.graph, batch));
    for (std::string line; std::getline(lines, line);) out << "  " << line << "\n";
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

// Which cluster of the drawing a node belongs to: one per child (its copies and its
// noise), one for the penalties; parent nodes, parameters and inputs stay outside, so
// that edges from a shared parameter into every child show the sharing.
std::string cluster_of(const Node& n) {
  if (n.role.rfind("child:", 0) == 0) return "child " + n.role.substr(6);
  if (n.role == "noise" && n.name.size() > 1 && n.name[0] == 'c') {
    const size_t slash = n.name.find('/');
    if (slash != std::string::npos) return "child " + n.name.substr(1, slash - 1);
  }
  if (n.role == "penalty") return "penalties";
  return "";
}

std::string node_style(const Node& n) {
  if (is_param(n)) return "shape=box, style=filled, fillcolor=lightyellow";
  if (is_input(n)) return "shape=box, style=filled, fillcolor=lightblue";
  if (n.has(kLoss)) return "shape=ellipse, style=filled, fillcolor=salmon";
  if (n.op->stochastic) return "shape=ellipse, style=filled, fillcolor=plum";
  return "shape=ellipse";
}
}  // namespace

void write_dot(std::ostream& out, const Graph& g, int64_t batch) {
  std::string error;
  auto values = try_infer(g, batch, &error);
  out << "digraph pens {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  std::map<std::string, std::vector<NodeId>> clusters;
  for (NodeId v : g.nodes()) clusters[cluster_of(g[v])].push_back(v);
  for (const auto& [cluster, members] : clusters) {
    const std::string indent = cluster.empty() ? "  " : "    ";
    if (!cluster.empty()) {
      out << "  subgraph \"cluster_" << dot_escape(cluster) << "\" {\n    label=\"" << dot_escape(cluster)
          << "\";\n    style=dashed;\n";
    }
    for (NodeId v : members) {
      const Node& n = g[v];
      // Lines of the label are escaped one by one and joined with DOT's "\\n".
      std::string label = dot_escape(n.name) + "\\n" + dot_escape(n.op->name);
      if (values) label += " " + (*values)[v].shape.str();
      if (!n.noise.empty()) label += "\\nnoise: " + dot_escape(noise_str(n));
      out << indent << "n" << v << " [label=\"" << label << "\", " << node_style(n) << "];\n";
    }
    if (!cluster.empty()) out << "  }\n";
  }
  for (NodeId v : g.nodes()) {
    const Node& n = g[v];
    const std::vector<NodeId> inputs = g.inputs(v);
    for (size_t slot = 0; slot < inputs.size(); ++slot) {
      out << "  n" << inputs[slot] << " -> n" << v;
      if (n.op->inputs.size() > 1 || n.op->variadic) {
        out << " [label=\"" << dot_escape(n.op->slot(slot).name) << "\", fontsize=8]";
      }
      out << ";\n";
    }
  }
  out << "}\n";
}

}  // namespace pens
