#include "pens/serialization/model_file.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "pens/graph/infer.h"
#include "pens/graph/noise.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/ir/memory.h"
#include "pens/ops/ir/suggest.h"
#include "pens/ops/op.h"
#include "pens/serialization/files.h"
#include "pens/serialization/json_text.h"
#include "pens/serialization/sha256.h"

namespace pens {

namespace {

using json = nlohmann::json;

// A parameter init's numeric settings, beside its kind: what the reader takes and the writer keeps.
constexpr const char* kInitSettings[] = {"std", "value", "limit", "diagonal"};

// Reads JSON values with their paths, so that every error names the file and the field.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  template <class... Args>
  [[noreturn]] void fail(const std::string& path, const Args&... args) const {
    pens::fail(source_, ": ", path.empty() ? "/" : path, ": ", args...);
  }

  const json& object(const json& v, const std::string& path) const {
    if (!v.is_object()) fail(path, "expected an object, got ", v.type_name());
    return v;
  }
  const json& array(const json& v, const std::string& path) const {
    if (!v.is_array()) fail(path, "expected an array, got ", v.type_name());
    return v;
  }
  // Every key of `obj` must be one of `allowed`.
  void only(const json& obj, const std::string& path, std::initializer_list<const char*> allowed) const {
    for (const auto& [key, value] : obj.items()) {
      bool known = false;
      for (const char* a : allowed) known = known || key == a;
      if (!known) {
        fail(path + "/" + key, "unknown field '", key, "'",
             unknown_name_hint(key, std::vector<std::string>(allowed.begin(), allowed.end()), "expected one of"));
      }
    }
  }
  const json& required(const json& obj, const std::string& path, const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end()) fail(path, "missing field '", key, "'");
    return *it;
  }
  const json* optional(const json& obj, const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  std::string string(const json& v, const std::string& path) const {
    if (!v.is_string()) fail(path, "expected a string, got ", v.type_name());
    return v.get<std::string>();
  }
  bool boolean(const json& v, const std::string& path) const {
    if (!v.is_boolean()) fail(path, "expected true or false, got ", v.type_name());
    return v.get<bool>();
  }
  std::string name(const json& v, const std::string& path) const {
    std::string s = string(v, path);
    if (s.empty()) fail(path, "a name cannot be empty");
    for (unsigned char c : s) {
      if (c < 0x20) fail(path, "a name cannot contain control characters");
    }
    return s;
  }
  int64_t integer(const json& v, const std::string& path) const {
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_unsigned()) fail(path, "integer out of range");
    fail(path, "expected an integer, got ", v.is_number_float() ? "a float" : v.type_name());
  }
  double number(const json& v, const std::string& path) const {
    if (!v.is_number()) fail(path, "expected a number, got ", v.type_name());
    if (v.is_number_unsigned() && v.get<uint64_t>() > (uint64_t{1} << 53)) fail(path, "number out of range");
    const double x = v.get<double>();
    if (!std::isfinite(x)) fail(path, "expected a finite number");
    return x;
  }
  // A shape: at most kMaxRank dimensions of at least 1 (-1 too for inputs), at most
  // kMaxTensorElements elements.
  Shape shape(const json& v, const std::string& path, bool allow_batch) const {
    array(v, path);
    if (v.size() > static_cast<size_t>(kMaxRank)) fail(path, "rank ", v.size(), " exceeds the maximum ", kMaxRank);
    std::vector<int64_t> dims;
    int64_t elements = 1;
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string p = path + "/" + std::to_string(i);
      const int64_t d = integer(v[i], p);
      if (d == kBatch && allow_batch) {
        dims.push_back(d);
        continue;
      }
      if (d < 1) fail(p, "dimension ", d, " must be at least 1", allow_batch ? " (or -1 for the batch)" : "");
      if (d > kMaxTensorElements || elements > kMaxTensorElements / d) {
        fail(path, "more than ", kMaxTensorElements, " elements");
      }
      elements *= d;
      dims.push_back(d);
    }
    return Shape::from(dims);
  }
  AttrValue attr_value(const json& v, const std::string& path) const {
    if (v.is_number_integer()) return integer(v, path);
    if (v.is_number()) return number(v, path);
    if (v.is_string()) return v.get<std::string>();
    if (v.is_array()) {
      bool all_integers = true;
      for (const json& x : v) all_integers = all_integers && x.is_number_integer();
      if (all_integers && !v.empty()) {
        std::vector<int64_t> out;
        for (size_t i = 0; i < v.size(); ++i) out.push_back(integer(v[i], path + "/" + std::to_string(i)));
        return out;
      }
      std::vector<double> out;
      for (size_t i = 0; i < v.size(); ++i) out.push_back(number(v[i], path + "/" + std::to_string(i)));
      return out;
    }
    fail(path, "attribute values are numbers, strings or flat lists of numbers, got ", v.type_name());
  }
  Attributes attributes(const json& v, const std::string& path) const {
    object(v, path);
    Attributes a;
    for (const auto& [key, value] : v.items()) a.set(key, attr_value(value, path + "/" + key));
    return a;
  }
  // Runs `f`, turning a pens::Error into one that names the file and `path`.
  template <class F>
  auto at(const std::string& path, F&& f) const {
    try {
      return f();
    } catch (const Error& e) {
      fail(path, e.what());
    }
  }

 private:
  std::string source_;
};

uint32_t flag_of(const std::string& name) {
  if (name == "loss") return kLoss;
  if (name == "frozen") return kFrozen;
  return 0;
}

void read_flags(const Reader& r, const json& obj, const std::string& path, Node& node) {
  const json* flags = r.optional(obj, "flags");
  if (!flags) return;
  r.array(*flags, path + "/flags");
  for (size_t i = 0; i < flags->size(); ++i) {
    const std::string p = path + "/flags/" + std::to_string(i);
    const std::string f = r.string((*flags)[i], p);
    const uint32_t bit = flag_of(f);
    if (!bit) r.fail(p, "unknown flag '", f, "' (loss | frozen)");
    node.flags |= bit;
  }
}

// A `children` list (of a noise annotation or a penalty term): children numbered from 1.
std::vector<int64_t> read_children(const Reader& r, const json& v, const std::string& path) {
  r.array(v, path);
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(r.integer(v[i], path + "/" + std::to_string(i)));
  if (out.empty()) r.fail(path, "an empty list of children (leave the key out: every child)");
  return out;
}

std::vector<NoiseAnnotation> read_noise_entries(const Reader& r, const json& list, const std::string& path,
                                                const Node& node) {
  r.array(list, path);
  std::vector<NoiseAnnotation> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string p = path + "/" + std::to_string(i);
    const json& entry = r.object(list[i], p);
    NoiseAnnotation a;
    a.kind = r.string(r.required(entry, p, "kind"), p + "/kind");
    for (const auto& [key, value] : entry.items()) {
      if (key == "children") {
        a.children = read_children(r, value, p + "/children");
      } else if (key != "kind") {
        a.params.set(key, r.attr_value(value, p + "/" + key));
      }
    }
    r.at(p, [&] { normalize_noise(node, a); });
    out.push_back(std::move(a));
  }
  return out;
}

void read_noise(const Reader& r, const json& obj, const std::string& path, Node& node) {
  const json* noise = r.optional(obj, "noise");
  if (!noise) return;
  for (NoiseAnnotation& a : read_noise_entries(r, *noise, path + "/noise", node)) node.noise.push_back(std::move(a));
}

void read_common(const Reader& r, const json& obj, const std::string& path, Node& node) {
  if (const json* layer = r.optional(obj, "layer")) node.layer = r.string(*layer, path + "/layer");
  if (const json* role = r.optional(obj, "role")) node.role = r.string(*role, path + "/role");
  read_flags(r, obj, path, node);
  read_noise(r, obj, path, node);
}

// A tree cell's ports (graph/tree.h): every port named, the cell checked against them.
// The child ports are a list ("children"); files of binary cells may name them "left"
// and "right" instead, as files did before N-ary cells.
TreePorts read_tree_ports(const Reader& r, const json& v, const std::string& path, const Graph& g) {
  r.object(v, path);
  TreePorts ports;
  const std::vector<std::pair<const char*, std::string*>> fields = {{"words", &ports.words}, {"leaf", &ports.leaf},
                                                                    {"compose", &ports.compose}, {"node", &ports.node},
                                                                    {"scores", &ports.scores}};
  r.only(v, path, {"words", "leaf", "children", "left", "right", "compose", "node", "scores"});
  for (const auto& [key, field] : fields) *field = r.name(r.required(v, path, key), path + "/" + key);
  if (const json* children = r.optional(v, "children")) {
    if (r.optional(v, "left") || r.optional(v, "right")) {
      r.fail(path, "name the child ports once: \"children\", or \"left\" and \"right\"");
    }
    r.array(*children, path + "/children");
    ports.children.clear();
    for (size_t i = 0; i < children->size(); ++i) {
      ports.children.push_back(r.name((*children)[i], cat(path, "/children/", i)));
    }
  } else {
    ports.children = {r.name(r.required(v, path, "left"), path + "/left"),
                      r.name(r.required(v, path, "right"), path + "/right")};
  }
  try {
    check_tree_cell(g, ports);
  } catch (const Error& e) {
    r.fail(path, e.what());
  }
  return ports;
}

json tree_ports_json(const TreePorts& p) {
  return {{"words", p.words},     {"leaf", p.leaf}, {"children", p.children},
          {"compose", p.compose}, {"node", p.node}, {"scores", p.scores}};
}

PseudoEnsembleSpec read_ensemble(const Reader& r, const json& v, const std::string& path, const Graph& g) {
  r.object(v, path);
  r.only(v, path,
         {"children", "pairing", "loss_on", "smoothing", "teacher", "batch_statistics", "statistics_by_part",
          "penalties", "lambda_schedule"});
  PseudoEnsembleSpec s;
  if (const json* x = r.optional(v, "children")) s.children = r.integer(*x, path + "/children");
  if (const json* x = r.optional(v, "pairing")) s.pairing = r.string(*x, path + "/pairing");
  if (const json* x = r.optional(v, "loss_on")) s.loss_on = r.string(*x, path + "/loss_on");
  if (const json* x = r.optional(v, "smoothing")) s.smoothing = r.number(*x, path + "/smoothing");
  if (const json* x = r.optional(v, "teacher")) s.teacher = r.integer(*x, path + "/teacher");
  if (const json* x = r.optional(v, "batch_statistics")) {
    // A string (every child's) or a list of one per child.
    const std::string p = path + "/batch_statistics";
    if (x->is_array()) {
      s.batch_statistics.clear();
      for (size_t i = 0; i < x->size(); ++i) s.batch_statistics.push_back(r.string((*x)[i], p + "/" + std::to_string(i)));
    } else {
      s.batch_statistics = {r.string(*x, p)};
    }
  }
  if (const json* x = r.optional(v, "statistics_by_part")) {
    s.statistics_by_part = r.boolean(*x, path + "/statistics_by_part");
  }
  if (const json* x = r.optional(v, "penalties")) {
    r.array(*x, path + "/penalties");
    for (size_t i = 0; i < x->size(); ++i) {
      const std::string p = path + "/penalties/" + std::to_string(i);
      const json& e = r.object((*x)[i], p);
      r.only(e, p,
             {"node", "target", "kind", "lambda", "rows", "fixed_target", "scheduled", "pairing", "children", "params"});
      PenaltyTerm t;
      t.node = r.name(r.required(e, p, "node"), p + "/node");
      if (!g.find(t.node)) r.fail(p + "/node", g.no_node_named(t.node));
      if (const json* target = r.optional(e, "target")) {
        t.target = r.name(*target, p + "/target");
        if (!g.find(t.target)) r.fail(p + "/target", g.no_node_named(t.target));
      }
      t.kind = r.string(r.required(e, p, "kind"), p + "/kind");
      t.lambda = r.number(r.required(e, p, "lambda"), p + "/lambda");
      if (const json* rows = r.optional(e, "rows")) t.rows = r.string(*rows, p + "/rows");
      if (const json* f = r.optional(e, "fixed_target")) t.fixed_target = r.boolean(*f, p + "/fixed_target");
      if (const json* f = r.optional(e, "scheduled")) t.scheduled = r.boolean(*f, p + "/scheduled");
      if (const json* f = r.optional(e, "pairing")) t.pairing = r.string(*f, p + "/pairing");
      if (const json* f = r.optional(e, "children")) t.children = read_children(r, *f, p + "/children");
      if (const json* ps = r.optional(e, "params")) {
        for (const auto& [name, value] : r.object(*ps, p + "/params").items()) {
          t.params[name] = r.number(value, p + "/params/" + name);
        }
      }
      s.penalties.push_back(std::move(t));
    }
  }
  if (const json* x = r.optional(v, "lambda_schedule")) {
    r.array(*x, path + "/lambda_schedule");
    for (size_t i = 0; i < x->size(); ++i) {
      const std::string p = path + "/lambda_schedule/" + std::to_string(i);
      const json& e = r.object((*x)[i], p);
      r.only(e, p, {"epochs", "scale"});
      s.lambda_schedule.push_back({r.number(r.required(e, p, "epochs"), p + "/epochs"),
                                   r.number(r.required(e, p, "scale"), p + "/scale")});
    }
  }
  try {
    s.validate();
  } catch (const Error& e) {
    r.fail(e.field().empty() ? path : path + "/" + e.field(), e.what());
  }
  return s;
}

// The moving averages, each checked against the graph as it is added (graph/infer.h).
void read_averages(const Reader& r, const json& v, Graph& g) {
  r.array(v, "/moving_averages");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = "/moving_averages/" + std::to_string(i);
    const json& e = r.object(v[i], p);
    r.only(e, p, {"param", "source", "decay", "at_inference", "child"});
    MovingAverage a;
    a.param = r.name(r.required(e, p, "param"), p + "/param");
    a.source = r.name(r.required(e, p, "source"), p + "/source");
    a.decay = r.number(r.required(e, p, "decay"), p + "/decay");
    if (const json* x = r.optional(e, "at_inference")) a.at_inference = r.boolean(*x, p + "/at_inference");
    if (const json* x = r.optional(e, "child")) a.child = r.integer(*x, p + "/child");
    g.add_average(std::move(a));
    r.at(p, [&] { verify(g); });
  }
}

// Builds the pseudo-ensemble once, so that what only its passes find (a noise parameter
// out of its domain, a penalty on a leaf) is refused when the file is read, pointing at
// the field that caused it.
void check_ensemble(const Reader& r, const Graph& g, const PseudoEnsembleSpec& spec,
                    const std::map<std::string, std::string>& path_of) {
  try {
    build_pseudo_ensemble(g, spec, {.labeled_rows = spec.splits_rows() ? 1 : -1});
  } catch (const Error& e) {
    std::string pointer = "/pseudo_ensemble";
    if (!e.node().empty()) {
      const auto it = path_of.find(e.node());
      pointer = it == path_of.end() ? "/nodes" : it->second;
    }
    r.fail(e.field().empty() ? pointer : pointer + "/" + e.field(), e.what());
  }
}

float checked_value(const Reader& r, double x, const std::string& path) {
  if (!std::isfinite(x) || std::abs(x) > 3.4028234663852886e38) r.fail(path, "value ", x, " is not a finite float32");
  return static_cast<float>(x);
}

}  // namespace

Model parse_model(const std::string& text, const std::string& source, const std::string& dir) {
  const Reader r(source);
  const json doc = parse_json_text(text, source);
  r.object(doc, "");
  r.only(doc, "", {"format_version", "opset_version", "metadata", "inputs", "parameters", "nodes", "outputs",
                   "moving_averages", "pseudo_ensemble", "tree", "weights"});
  const int64_t version = r.integer(r.required(doc, "", "format_version"), "/format_version");
  if (version != kFormatVersion) {
    r.fail("/format_version", "unsupported format_version ", version, " (this pens reads ", kFormatVersion, ")");
  }
  const int64_t opset = r.integer(r.required(doc, "", "opset_version"), "/opset_version");
  if (opset != kOpsetVersion) {
    r.fail("/opset_version", "unsupported opset_version ", opset, " (this pens has ", kOpsetVersion, ")");
  }

  Model m;
  if (const json* meta = r.optional(doc, "metadata")) m.metadata = r.object(*meta, "/metadata");
  Graph& g = m.graph;
  std::map<std::string, std::string> path_of;  // node name -> JSON path, for errors

  // Inputs.
  const json& inputs = r.array(r.required(doc, "", "inputs"), "/inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string p = "/inputs/" + std::to_string(i);
    const json& e = r.object(inputs[i], p);
    r.only(e, p, {"name", "shape", "dtype", "layer", "role", "noise", "flags"});
    const std::string name = r.name(r.required(e, p, "name"), p + "/name");
    const Shape shape = r.shape(r.required(e, p, "shape"), p + "/shape", true);
    std::string dtype = "real";
    if (const json* d = r.optional(e, "dtype")) dtype = r.string(*d, p + "/dtype");
    const NodeId v = r.at(p, [&] {
      return g.add("input", {}, {{"shape", shape.to_vector()}, {"dtype", dtype}}, name);
    });
    read_common(r, e, p, g.node(v));
    path_of[name] = p;
  }

  // Parameters.
  const json* params = r.optional(doc, "parameters");
  std::vector<std::pair<std::string, std::string>> inline_values;  // name, path of "values"
  int64_t total_elements = 0;
  if (params) {
    r.array(*params, "/parameters");
    for (size_t i = 0; i < params->size(); ++i) {
      const std::string p = "/parameters/" + std::to_string(i);
      const json& e = r.object((*params)[i], p);
      r.only(e, p, {"name", "shape", "dtype", "init", "max_norm", "layer", "role", "noise", "flags", "values"});
      const std::string name = r.name(r.required(e, p, "name"), p + "/name");
      const Shape shape = r.shape(r.required(e, p, "shape"), p + "/shape", false);
      total_elements += shape.numel();
      if (total_elements > kMaxTensorElements) r.fail(p + "/shape", "the parameters exceed ", kMaxTensorElements, " elements in all");
      if (const json* d = r.optional(e, "dtype"); d && r.string(*d, p + "/dtype") != "float32") {
        r.fail(p + "/dtype", "parameters are float32, got '", d->get<std::string>(), "'");
      }
      Attributes attrs;
      if (const json* init = r.optional(e, "init")) {
        const std::string ip = p + "/init";
        r.object(*init, ip);
        r.only(*init, ip, {"kind", "std", "value", "limit", "diagonal"});  // "kind" and kInitSettings
        attrs.set("init", r.string(r.required(*init, ip, "kind"), ip + "/kind"));
        for (const char* key : kInitSettings) {
          if (const json* x = r.optional(*init, key)) attrs.set(key, r.number(*x, ip + "/" + key));
        }
      }
      if (const json* x = r.optional(e, "max_norm")) attrs.set("max_norm", r.number(*x, p + "/max_norm"));
      const NodeId v = r.at(p, [&] { return g.param(name, shape, attrs); });
      read_common(r, e, p, g.node(v));
      path_of[name] = p;
      if (r.optional(e, "values")) inline_values.emplace_back(name, p + "/values");
    }
  }

  // Nodes: created first, wired once all exist, so inputs may name later nodes.
  const json& nodes = r.array(r.required(doc, "", "nodes"), "/nodes");
  std::vector<std::pair<NodeId, size_t>> to_wire;  // node, index in /nodes
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string p = "/nodes/" + std::to_string(i);
    const json& e = r.object(nodes[i], p);
    r.only(e, p, {"name", "op", "inputs", "attrs", "layer", "role", "noise", "flags"});
    const std::string name = r.name(r.required(e, p, "name"), p + "/name");
    const std::string op = r.string(r.required(e, p, "op"), p + "/op");
    if (op == "input" || op == "parameter") r.fail(p + "/op", "declare ", op, "s in /", op, "s");
    Attributes attrs;
    if (const json* a = r.optional(e, "attrs")) attrs = r.attributes(*a, p + "/attrs");
    const NodeId v = r.at(p, [&] { return g.add_unwired(op, attrs, name); });
    read_common(r, e, p, g.node(v));
    path_of[name] = p;
    to_wire.emplace_back(v, i);
  }
  for (const auto& [node, i] : to_wire) {
    const NodeId v = node;  // clang 14 cannot capture structured bindings in lambdas
    const std::string p = "/nodes/" + std::to_string(i);
    const json& e = nodes[i];
    std::vector<NodeId> in;
    if (const json* list = r.optional(e, "inputs")) {
      r.array(*list, p + "/inputs");
      for (size_t j = 0; j < list->size(); ++j) {
        const std::string ip = p + "/inputs/" + std::to_string(j);
        const std::string name = r.string((*list)[j], ip);
        const auto u = g.find(name);
        if (!u) r.fail(ip, g.no_node_named(name));
        in.push_back(*u);
      }
    }
    r.at(p, [&] { g.set_inputs(v, in); });
  }

  // Outputs.
  const json& outputs = r.array(r.required(doc, "", "outputs"), "/outputs");
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string p = "/outputs/" + std::to_string(i);
    const std::string name = r.string(outputs[i], p);
    const auto v = g.find(name);
    if (!v) r.fail(p, g.no_node_named(name));
    if (g[*v].has(kOutput)) r.fail(p, "'", name, "' is listed twice");
    g.set_flag(*v, kOutput);
  }

  // The whole graph, with errors pointing at the node's entry.
  std::vector<ValueInfo> values;
  try {
    values = verify(g);
  } catch (const Error& e) {
    auto it = path_of.find(e.node());
    r.fail(it == path_of.end() ? "/nodes" : it->second, e.what());
  }
  // A size declared but never allocated (a constant nothing reads, say) would pass until
  // something reads it: refused where the file is read. Parameters, and every value at a
  // real batch, are charged with their totals when a store or a tape is made, which says more.
  for (NodeId v : g.nodes()) {
    const uint64_t bytes = static_cast<uint64_t>(values[v].shape.numel()) * sizeof(float);
    if (!is_param(g[v]) && bytes > memory_limit()) {
      r.fail(path_of.at(g[v].name), "node '", g[v].name, "' holds ", values[v].shape.str(), ": ", format_bytes(bytes),
             ", more than pens' memory limit of ", format_bytes(memory_limit()), " (--memory-limit GB raises it)");
    }
  }

  if (const json* averages = r.optional(doc, "moving_averages")) read_averages(r, *averages, g);
  if (const json* pe = r.optional(doc, "pseudo_ensemble")) m.ensemble = read_ensemble(r, *pe, "/pseudo_ensemble", g);
  if (const json* tree = r.optional(doc, "tree")) m.tree = read_tree_ports(r, *tree, "/tree", g);
  // A tree model's pseudo-ensemble is built on each tree's graph, not on the cell.
  if (m.ensemble && !m.tree) check_ensemble(r, g, *m.ensemble, path_of);

  // Parameter values: inline, in a sidecar, or none.
  const json* weights = r.optional(doc, "weights");
  if (weights && !inline_values.empty()) {
    r.fail(inline_values[0].second, "values are given both inline and in /weights");
  }
  if (!inline_values.empty() || weights) {
    m.values = std::make_shared<ParamStore<float>>(g);
    ParamStore<float>& store = *m.values;
    if (weights) {
      r.object(*weights, "/weights");
      r.only(*weights, "/weights", {"file", "bytes", "sha256", "dtype", "byte_order"});
      const std::string file = r.string(r.required(*weights, "/weights", "file"), "/weights/file");
      if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
        r.fail("/weights/file", "must be a file name beside the model file, got '", file, "'");
      }
      if (r.string(r.required(*weights, "/weights", "dtype"), "/weights/dtype") != "float32") {
        r.fail("/weights/dtype", "only float32 sidecars exist");
      }
      if (r.string(r.required(*weights, "/weights", "byte_order"), "/weights/byte_order") != "little") {
        r.fail("/weights/byte_order", "only little-endian sidecars exist");
      }
      const int64_t declared = r.integer(r.required(*weights, "/weights", "bytes"), "/weights/bytes");
      const int64_t expected = 4 * store.numel();
      if (declared != expected) {
        r.fail("/weights/bytes", "declares ", declared, " bytes, the parameters need ", expected);
      }
      const std::string sha = r.string(r.required(*weights, "/weights", "sha256"), "/weights/sha256");
      m.weights_file = file;
      const std::string path = (std::filesystem::path(dir) / file).string();
      std::string bytes;
      try {
        bytes = read_file(path, static_cast<uint64_t>(expected));
      } catch (const Error& e) {
        r.fail("/weights/file", e.what());
      }
      if (static_cast<int64_t>(bytes.size()) != expected) {
        r.fail("/weights/file", path, " holds ", bytes.size(), " bytes, expected ", expected);
      }
      if (sha256_hex(bytes) != sha) r.fail("/weights/sha256", path, " does not match its checksum");
      size_t offset = 0;
      for (const ParamEntry& p : store.entries()) {
        float* dst = store.value(p).data;
        read_float32_le(bytes.data() + offset, dst, p.shape.numel());
        offset += 4 * static_cast<size_t>(p.shape.numel());
        for (int64_t i = 0; i < p.shape.numel(); ++i) {
          if (!std::isfinite(dst[i])) r.fail("/weights/file", "parameter '", p.name, "' element ", i, " is not finite");
        }
      }
    } else {
      std::set<std::string> given;
      for (const auto& [name, path] : inline_values) given.insert(name);
      for (const ParamEntry& p : store.entries()) {
        if (!given.count(p.name)) r.fail(path_of[p.name], "values are given for some parameters but not for '", p.name, "'");
      }
      for (size_t i = 0; i < params->size(); ++i) {
        const std::string p = "/parameters/" + std::to_string(i);
        const json& e = (*params)[i];
        const json& vals = r.array(e.at("values"), p + "/values");
        const ParamEntry& entry = store.at(e.at("name").get<std::string>());
        if (static_cast<int64_t>(vals.size()) != entry.shape.numel()) {
          r.fail(p + "/values", vals.size(), " values, shape ", entry.shape.str(), " needs ", entry.shape.numel());
        }
        float* dst = store.value(entry).data;
        for (size_t j = 0; j < vals.size(); ++j) {
          const std::string vp = p + "/values/" + std::to_string(j);
          dst[j] = checked_value(r, r.number(vals[j], vp), vp);
        }
      }
    }
  }
  return m;
}

Model load_model(const std::string& path) {
  const std::string text = read_file(path, kMaxModelFileBytes);
  const std::filesystem::path p(path);
  return parse_model(text, path, p.has_parent_path() ? p.parent_path().string() : ".");
}

json attribute_json(const AttrValue& v) {
  return std::visit([](const auto& x) { return json(x); }, v);
}

json attributes_json(const Attributes& a) {
  json out = json::object();
  for (const auto& [k, v] : a.items()) out[k] = attribute_json(v);
  return out;
}

namespace {

json flags_json(const Node& n) {
  json f = json::array();
  if (n.has(kLoss)) f.push_back("loss");
  if (n.has(kFrozen)) f.push_back("frozen");
  return f;
}

// Fields every kind of entry may carry, written only when they say something.
void write_common(json& e, const Node& n) {
  if (!n.layer.empty()) e["layer"] = n.layer;
  if (n.role != "parent") e["role"] = n.role;
  if (const json f = flags_json(n); !f.empty()) e["flags"] = f;
  if (!n.noise.empty()) e["noise"] = noise_list_json(n.noise);
}

json ensemble_json(const PseudoEnsembleSpec& s) {
  json pen = json::array();
  for (const PenaltyTerm& t : s.penalties) {
    pen.push_back({{"node", t.node}, {"kind", t.kind}, {"lambda", t.lambda}, {"rows", t.rows}});
    if (!t.target.empty()) pen.back()["target"] = t.target;  // written when set: older files stay canonical
    if (t.fixed_target) pen.back()["fixed_target"] = true;  // likewise
    if (!t.scheduled) pen.back()["scheduled"] = false;      // likewise
    if (!t.pairing.empty()) pen.back()["pairing"] = t.pairing;  // likewise
    if (!t.children.empty()) pen.back()["children"] = t.children;  // likewise
    if (!t.params.empty()) pen.back()["params"] = t.params;
  }
  json out = {{"children", s.children}, {"pairing", s.pairing}, {"loss_on", s.loss_on},
              {"smoothing", s.smoothing}, {"penalties", pen}};
  if (s.teacher != 0) out["teacher"] = s.teacher;
  if (s.batch_statistics.size() > 1) {
    out["batch_statistics"] = s.batch_statistics;
  } else if (s.batch_statistics != std::vector<std::string>{"own"}) {
    out["batch_statistics"] = s.batch_statistics[0];
  }
  if (s.statistics_by_part) out["statistics_by_part"] = true;
  if (!s.lambda_schedule.empty()) {
    json stages = json::array();
    for (const LambdaStage& st : s.lambda_schedule) stages.push_back({{"epochs", st.epochs}, {"scale", st.scale}});
    out["lambda_schedule"] = stages;
  }
  return out;
}

}  // namespace

std::string undrawn_noise(const Model& model) {
  if (model.ensemble) return "";
  for (NodeId v : model.graph.nodes()) {
    const Node& node = model.graph[v];
    if (node.noise.empty()) continue;
    return cat("node '", node.name, "' carries ", node.noise[0].kind, " noise, but the model has no pseudo_ensemble",
               " section, so no child draws it and the model would train clean; add one (\"pseudo_ensemble\":",
               " {\"children\": 1, \"loss_on\": \"child\"}, docs/model-format.md) or drop the noise");
  }
  return "";
}

namespace {

// write_model, with the sidecar's name chosen from its bytes' SHA-256 (hex).
ModelText write_model_text(const Model& m, ValueStorage storage,
                           const std::function<std::string(const std::string&)>& sidecar_name_for) {
  const Graph& g = m.graph;
  verify(g);
  if (m.ensemble) m.ensemble->validate();
  json doc = {{"format_version", kFormatVersion}, {"opset_version", kOpsetVersion}, {"metadata", m.metadata}};
  json inputs = json::array(), params = json::array(), nodes = json::array(), outputs = json::array();

  if (!m.values) storage = ValueStorage::None;
  if (storage == ValueStorage::Auto) {
    storage = m.values->numel() <= kInlineLimit ? ValueStorage::Inline : ValueStorage::Sidecar;
  }
  std::string sidecar;
  for (NodeId v : g.topological_order()) {
    const Node& n = g[v];
    json e = {{"name", n.name}};
    if (is_input(n)) {
      e["shape"] = n.attrs.get_ints("shape");
      e["dtype"] = n.attrs.get_string("dtype");
      write_common(e, n);
      inputs.push_back(e);
    } else if (is_param(n)) {
      e["shape"] = n.attrs.get_ints("shape");
      e["dtype"] = "float32";
      json init = {{"kind", n.attrs.get_string("init")}};
      for (const char* key : kInitSettings) {
        if (n.attrs.has(key)) init[key] = n.attrs.get_float(key);
      }
      e["init"] = init;
      if (n.attrs.has("max_norm")) e["max_norm"] = n.attrs.get_float("max_norm");
      write_common(e, n);
      if (storage == ValueStorage::Inline || storage == ValueStorage::Sidecar) {
        const TensorView<const float> values = m.values->value(n.name);
        if (storage == ValueStorage::Inline) {
          json list = json::array();
          for (int64_t i = 0; i < values.size(); ++i) list.push_back(static_cast<double>(values[i]));
          e["values"] = list;
        } else {
          append_float32_le(sidecar, values.data, values.size());
        }
      }
      params.push_back(e);
    } else {
      e["op"] = n.op->name;
      json in = json::array();
      for (NodeId u : g.inputs(v)) in.push_back(g[u].name);
      if (!in.empty()) e["inputs"] = in;
      if (!n.attrs.empty()) {
        const json attrs = attributes_json(n.attrs);
        e["attrs"] = attrs;
      }
      write_common(e, n);
      nodes.push_back(e);
    }
    if (n.has(kOutput)) outputs.push_back(n.name);
  }
  doc["inputs"] = inputs;
  doc["parameters"] = params;
  doc["nodes"] = nodes;
  doc["outputs"] = outputs;
  if (!g.averages().empty()) doc["moving_averages"] = averages_json(g.averages());
  if (m.ensemble) doc["pseudo_ensemble"] = ensemble_json(*m.ensemble);
  if (m.tree) doc["tree"] = tree_ports_json(*m.tree);
  std::string sidecar_name;
  if (storage == ValueStorage::Sidecar) {
    const std::string sha = sha256_hex(sidecar);
    sidecar_name = sidecar_name_for(sha);
    doc["weights"] = {{"file", sidecar_name},
                      {"bytes", sidecar.size()},
                      {"sha256", sha},
                      {"dtype", "float32"},
                      {"byte_order", "little"}};
  }
  return {format_json(doc) + "\n", sidecar, sidecar_name};
}

}  // namespace

std::vector<std::string> unread_nodes(const Model& model) {
  const Graph& g = model.graph;
  std::vector<std::string> roots;
  for (NodeId v : g.nodes()) {
    if (g[v].has(kOutput) || g[v].has(kLoss)) roots.push_back(g[v].name);
  }
  if (model.ensemble) {
    for (const PenaltyTerm& t : model.ensemble->penalties) roots.insert(roots.end(), {t.node, t.target});
  }
  for (const MovingAverage& a : g.averages()) roots.insert(roots.end(), {a.source, a.param});
  if (model.tree) {
    const TreePorts& p = *model.tree;
    roots.insert(roots.end(), {p.words, p.leaf, p.compose, p.node, p.scores});
    roots.insert(roots.end(), p.children.begin(), p.children.end());
  }
  std::vector<char> used(g.size(), 0);
  for (const std::string& name : roots) {
    const std::optional<NodeId> v = name.empty() ? std::nullopt : g.find(name);
    if (!v || used[*v]) continue;
    const std::vector<char> feeds = ancestors(g, *v);
    for (size_t i = 0; i < used.size(); ++i) used[i] |= feeds[i];
  }
  std::vector<std::string> unread;
  for (NodeId v : g.nodes()) {
    if (!used[v]) unread.push_back(g[v].name);
  }
  return unread;
}

ModelText write_model(const Model& m, ValueStorage storage, const std::string& sidecar_name) {
  return write_model_text(m, storage, [&](const std::string&) { return sidecar_name; });
}

void save_model(const Model& model, const std::string& path, ValueStorage storage) {
  const std::filesystem::path p(path);
  const std::filesystem::path dir = p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
  // The sidecar is named by its content, so that a model file saved again never refers to
  // a sidecar that has just been replaced: a kill between the two writes leaves the old
  // JSON with its old sidecar, both whole.
  const std::string prefix = p.stem().string() + ".weights";
  const ModelText text = write_model_text(model, storage, [&](const std::string& sha) {
    return prefix + "-" + sha.substr(0, 16) + ".bin";
  });
  // The sidecar first: the JSON that refers to it only appears once it is complete.
  if (!text.sidecar.empty()) write_file_atomically((dir / text.sidecar_name).string(), text.sidecar);
  write_file_atomically(path, text.json);
  // Sidecars of this name that the JSON no longer refers to (the one it replaced, one a
  // kill left behind, the "<stem>.weights.bin" of files written before sidecars were
  // named by their content).
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool ours = name == prefix + ".bin" || (name.rfind(prefix + "-", 0) == 0 && name.size() == prefix.size() + 21 &&
                                                  name.ends_with(".bin"));
    if (ours && name != text.sidecar_name) std::filesystem::remove(entry.path(), ec);
  }
}

std::vector<NoiseAnnotation> read_noise_list(const json& list, const std::string& source, const std::string& path,
                                             const Node& node) {
  return read_noise_entries(Reader(source), list, path, node);
}

json noise_list_json(const std::vector<NoiseAnnotation>& noise) {
  json list = json::array();
  for (const NoiseAnnotation& a : noise) {
    json entry = {{"kind", a.kind}};
    for (const auto& [k, v] : a.params.items()) entry[k] = attribute_json(v);
    if (!a.children.empty()) entry["children"] = a.children;
    list.push_back(entry);
  }
  return list;
}

json averages_json(const std::vector<MovingAverage>& averages) {
  json out = json::array();
  for (const MovingAverage& a : averages) {
    json e = {{"param", a.param}, {"source", a.source}, {"decay", a.decay}, {"at_inference", a.at_inference}};
    if (a.child != 0) e["child"] = a.child;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace pens
