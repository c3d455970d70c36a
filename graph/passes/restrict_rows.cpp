#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

#include "pens/graph/infer.h"
#include "pens/graph/pass.h"
#include "pens/ops/op.h"

namespace pens {

namespace {

constexpr int64_t kToEnd = std::numeric_limits<int64_t>::max();  // a range open to the batch's end

// The rows of a batch a node's readers read: [lo, hi), hi = kToEnd for "to the end".
struct Rows {
  bool read = false;  // false: nothing reads them (yet)
  int64_t lo = 0, hi = 0;

  bool all() const { return read && lo == 0 && hi == kToEnd; }
  void merge(int64_t a, int64_t b) {  // the hull: a node computes one contiguous range
    lo = read ? std::min(lo, a) : a;
    hi = read ? std::max(hi, b) : b;
    read = true;
  }
  void merge(const Rows& r) {
    if (r.read) merge(r.lo, r.hi);
  }
};

bool is_row_slice(const Node& n) {
  return n.op->name == "slice" && n.attrs.get_int("axis") == 0 && n.attrs.get_int("begin") >= 0;
}

int64_t slice_end(const Node& n) { return n.attrs.has("end") ? n.attrs.get_int("end") : kToEnd; }

// Slice attributes for rows [lo, hi) of a value.
Attributes row_slice(int64_t lo, int64_t hi) {
  Attributes a{{"axis", int64_t{0}}, {"begin", lo}};
  if (hi != kToEnd) a.set("end", hi);
  return a;
}

// The role a slice feeding v takes: v's, or for a noise op the role of the node its noise
// feeds (the child the slice's rows are for).
std::string owner_role(const Graph& g, NodeId v) {
  while (g[v].role == "noise" && !g.consumers(v).empty()) v = g.consumers(v).front();
  return g[v].role;
}

}  // namespace

Graph RestrictRows::run(const Graph& in) const {
  Graph g = in;
  // Values with the batch as their first dimension: those whose first dimension follows
  // the batch while the others do not. Two batches beyond every row slice's bounds.
  int64_t bound = kVerifyBatch;
  for (NodeId v : g.nodes()) {
    if (!is_row_slice(g[v])) continue;
    bound = std::max(bound, g[v].attrs.get_int("begin") + 1);
    if (g[v].attrs.has("end")) bound = std::max(bound, g[v].attrs.get_int("end") + 1);
  }
  const std::vector<char> batched_rows = batch_rows(g, bound);
  const auto batched = [&](NodeId v) { return batched_rows[v] != 0; };

  // The rows each node's readers read, readers first.
  const std::vector<NodeId> order = g.topological_order();
  std::vector<Rows> rows(g.size());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const NodeId v = *it;
    Rows& r = rows[v];
    if (!batched(v) || g[v].has(kOutput) || g[v].has(kLoss)) {
      r.merge(0, kToEnd);
      continue;
    }
    for (NodeId c : g.consumers(v)) {
      const Node& n = g[c];
      if (is_row_slice(n)) {
        r.merge(n.attrs.get_int("begin"), slice_end(n));
      } else if (n.op->row_wise && batched(c)) {
        r.merge(rows[c]);
      } else {
        r.merge(0, kToEnd);
      }
    }
  }
  const auto restricted = [&](NodeId v) {
    const Node& n = g[v];
    return n.op->row_wise && !n.op->leaf && batched(v) && rows[v].read && !rows[v].all();
  };

  // Row slices reading a restricted node will count from its first row: found before
  // slices are added below, which must keep their own bounds.
  std::vector<std::pair<NodeId, int64_t>> shifted;  // (slice, rows to subtract)
  for (NodeId v : order) {
    if (!restricted(v)) continue;
    for (NodeId c : g.consumers(v)) {
      if (!restricted(c) && is_row_slice(g[c])) shifted.emplace_back(c, rows[v].lo);
    }
  }

  // Restricted nodes read their batched inputs' rows through slices (one per input and
  // range); noise draws from where those rows are in the whole batch's draw.
  std::map<std::tuple<NodeId, int64_t, int64_t>, NodeId> slices;
  for (NodeId v : order) {
    if (!restricted(v)) continue;
    const Rows want = rows[v];
    std::vector<NodeId> inputs = g.inputs(v);
    for (NodeId& u : inputs) {
      if (!batched(u)) continue;
      // u computes rows [from, ...) of the batch: all of them, or its own range.
      const int64_t from = restricted(u) ? rows[u].lo : 0;
      if (restricted(u) && rows[u].lo == want.lo && rows[u].hi == want.hi) continue;
      const int64_t lo = want.lo - from, hi = want.hi == kToEnd ? kToEnd : want.hi - from;
      const auto key = std::make_tuple(u, lo, hi);
      if (!slices.count(key)) {
        const std::string name = cat(g[u].name, "[rows ", want.lo, "..", want.hi == kToEnd ? "" : cat(want.hi), "]");
        const std::string role = owner_role(g, v), layer = g[v].layer;  // copies: adding moves the nodes
        const NodeId s = g.add("slice", {u}, row_slice(lo, hi), name);
        g.node(s).role = role;
        g.node(s).layer = layer;
        slices[key] = s;
      }
      u = slices[key];
    }
    g.set_inputs(v, inputs);
    if (g[v].attrs.has("row_offset")) g.node(v).attrs.set("row_offset", g[v].attrs.get_int("row_offset") + want.lo);
  }
  for (const auto& [c, by] : shifted) {
    Node& n = g.node(c);
    const int64_t end = slice_end(n);
    n.attrs = row_slice(n.attrs.get_int("begin") - by, end == kToEnd ? kToEnd : end - by);
  }
  return g;
}

}  // namespace pens
