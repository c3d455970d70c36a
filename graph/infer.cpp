#include "pens/graph/infer.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>
#include <unordered_set>

#include "pens/graph/noise.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/op.h"

namespace pens {

namespace {
std::vector<ValueInfo> infer_in_order(const Graph& g, const std::vector<NodeId>& order,
                                      int64_t batch) {
  std::vector<ValueInfo> values(g.size());
  std::vector<ValueInfo> in;
  for (NodeId v : order) {
    const Node& node = g[v];
    in.clear();
    for (NodeId u : g.inputs(v)) in.push_back(values[u]);
    ValueInfo out = node.op->infer(InferCtx(node, in));
    out.shape = out.shape.bind_batch(batch);
    values[v] = out;
  }
  return values;
}
// Each moving average: a frozen parameter of its source's shape, the source free of the batch.
void verify_averages(const Graph& g, const std::vector<ValueInfo>& values, int64_t batch) {
  const std::vector<ValueInfo> other = infer_in_order(g, g.topological_order(), batch + 1);
  std::set<std::string> targets;
  for (const MovingAverage& a : g.averages()) {
    const std::string what = cat("moving average of '", a.source, "' into '", a.param, "'");
    const std::optional<NodeId> source = g.find(a.source), param = g.find(a.param);
    if (!source) fail_at(a.source, what, ": ", g.no_node_named(a.source));
    if (!param) fail_at(a.param, what, ": ", g.no_node_named(a.param));
    if (!is_param(g[*param]) || !g[*param].has(kFrozen)) {
      fail_at(a.param, what, ": '", a.param, "' must be a parameter marked frozen (the optimizer must not move it)");
    }
    if (!(a.decay >= 0 && a.decay < 1)) fail_at(a.param, what, ": decay ", a.decay, " is outside [0, 1)");
    if (a.child < 0) fail_at(a.param, what, ": child ", a.child, " must be >= 0 (0: the clean parent's value)");
    if (a.child > 0 && is_param(g[*source])) {
      fail_at(a.param, what, ": child ", a.child, " names a child's copy, but '", a.source,
              "' is a parameter, which every child shares (child applies to computed values)");
    }
    if (!targets.insert(a.param).second) fail_at(a.param, what, ": '", a.param, "' already holds another average");
    const ValueInfo& s = values[*source];
    if (s.dtype != DType::Real || s.shape != other[*source].shape) {
      fail_at(a.source, what, ": the source's value (", dtype_name(s.dtype), " ", s.shape.str(),
              ") must be real and free of the batch");
    }
    if (s.shape != values[*param].shape) {
      fail_at(a.param, what, ": the source's value is ", s.shape.str(), ", the parameter ", values[*param].shape.str());
    }
  }
}
}  // namespace

std::vector<ValueInfo> infer_values(const Graph& g, int64_t batch) {
  return infer_in_order(g, g.topological_order(), batch);
}

namespace {

// A shape error found at the placeholder batch kVerifyBatch, with the batch dimensions in
// its shapes written B: the same inference at a batch one larger fails with the same
// message but for the numbers that follow the batch, so where the two messages read
// "2" and "3" in the same place, the message says "B".
std::string with_batch_as_b(const Graph& g, const std::vector<NodeId>& order, const Error& at_batch) {
  std::string other;
  try {
    infer_in_order(g, order, kVerifyBatch + 1);
    return at_batch.what();
  } catch (const Error& e) {
    other = e.what();
  }
  const std::string message = at_batch.what();
  const auto token_end = [](const std::string& s, size_t i) {
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i;
  };
  std::string out;
  size_t i = 0, j = 0;
  while (i < message.size() && j < other.size()) {
    const bool digits = std::isdigit(static_cast<unsigned char>(message[i])) &&
                        std::isdigit(static_cast<unsigned char>(other[j])) &&
                        (i == 0 || !std::isalnum(static_cast<unsigned char>(message[i - 1])));
    if (!digits) {
      if (message[i] != other[j]) return message;  // not the same error: leave it as it is
      out += message[i++];
      ++j;
      continue;
    }
    const size_t i_end = token_end(message, i), j_end = token_end(other, j);
    const std::string a = message.substr(i, i_end - i), b = other.substr(j, j_end - j);
    out += a == std::to_string(kVerifyBatch) && b == std::to_string(kVerifyBatch + 1) ? "B" : a;
    i = i_end;
    j = j_end;
  }
  return i == message.size() && j == other.size() ? out : message;
}

}  // namespace

std::vector<ValueInfo> verify(const Graph& g, int64_t batch, std::vector<NodeId>* order_out) {
  if (batch < 1) fail("batch size must be at least 1, got ", batch);
  const std::vector<NodeId> order = g.topological_order();
  // Graphs built per example (a tree each) are verified after every pass, so this loop
  // allocates little: names are views into the graph, and one slot list serves every node.
  std::unordered_set<std::string_view> names;
  names.reserve(order.size());
  std::vector<int> slots;
  for (NodeId v : order) {
    const Node& node = g[v];
    if (!node.op) fail("node '", node.name, "' has no op");
    if (!names.insert(node.name).second) fail_at(node.name, "duplicate node name '", node.name, "'");
    // Slots must be exactly 0..n-1, each fed once.
    g.input_slots(v, slots);
    std::sort(slots.begin(), slots.end());
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i] != static_cast<int>(i)) {
        fail_at(node.name, "node '", node.name, "' (", node.op->name, "): input slot ", i,
                " is missing or fed twice");
      }
    }
    node.op->check_arity(node, slots.size());
    Attributes attrs = node.attrs;
    node.op->normalize_attrs(attrs, node.name);
    for (NoiseAnnotation annotation : node.noise) normalize_noise(node, annotation);
    if (is_param(node) && Shape::from(node.attrs.get_ints("shape")).has_batch()) {
      fail_at(node.name, "node '", node.name, "' (parameter): a parameter cannot have a batch dimension");
    }
  }
  std::vector<ValueInfo> values;
  try {
    values = infer_in_order(g, order, batch);
  } catch (const Error& at_batch) {
    if (batch != kVerifyBatch) throw;
    // The batch here is a placeholder, not the user's: its dimensions are written B.
    throw Error(with_batch_as_b(g, order, at_batch), at_batch.node(), at_batch.field());
  }
  if (order_out) *order_out = order;
  for (NodeId v : order) {
    const Node& node = g[v];
    if (node.has(kLoss) && (values[v].shape.numel() != 1 || values[v].dtype != DType::Real)) {
      fail_at(node.name, "node '", node.name, "' is marked as a loss but its value is ",
              dtype_name(values[v].dtype), " ", values[v].shape.str(), ", not a real scalar");
    }
    if (node.has(kFrozen) && !is_param(node)) {
      fail_at(node.name, "node '", node.name, "' is marked frozen but is not a parameter");
    }
  }
  if (!g.averages().empty()) verify_averages(g, values, batch);
  return values;
}

std::vector<char> batch_rows(const Graph& g, int64_t batch) {
  const std::vector<ValueInfo> small = infer_values(g, batch), large = infer_values(g, batch + 1);
  std::vector<char> out(g.size(), 0);
  for (NodeId v : g.nodes()) {
    const Shape &a = small[v].shape, &b = large[v].shape;
    if (a.rank == 0 || a[0] + 1 != b[0]) continue;
    bool rest_equal = true;
    for (int d = 1; d < a.rank; ++d) rest_equal = rest_equal && a[d] == b[d];
    out[v] = rest_equal;
  }
  return out;
}

}  // namespace pens
