#include "pens/autodiff/tape_plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <tuple>


namespace pens::tape_plan {

std::vector<Stack> stack_candidates(const Graph& g, const std::vector<NodeId>& order,
                                    const std::vector<ValueInfo>& values) {
  std::vector<Stack> candidates;
  std::map<std::tuple<const OpDef*, std::string, std::vector<NodeId>>, size_t> by_shared;
  for (NodeId v : order) {
    const Node& n = g[v];
    if (n.op->leaf || !n.op->stacks_rows || n.op->scratch || !n.op->stacks_rows(n.attrs)) continue;
    std::vector<NodeId> shared = g.inputs(v);
    const NodeId first = shared.front();
    if (is_param(g[first]) || values[first].shape.rank != 2) continue;
    shared.erase(shared.begin());
    const auto [at, added] = by_shared.try_emplace({n.op, n.attrs.str(), shared}, candidates.size());
    if (added) candidates.emplace_back();
    candidates[at->second].members.push_back(v);
    candidates[at->second].firsts.push_back(first);
  }
  return candidates;
}

std::vector<NodeId> stacked_order(const Graph& g, const std::vector<NodeId>& order, const std::vector<Stack>& stacks) {
  // Each stack runs as one unit, named by its first member, at the place of its last.
  std::vector<NodeId> unit(g.size());
  std::vector<size_t> place(g.size(), 0);
  std::vector<std::vector<NodeId>> members(g.size());
  for (size_t i = 0; i < order.size(); ++i) {
    unit[order[i]] = order[i];
    place[order[i]] = i;
    members[order[i]] = {order[i]};
  }
  for (const Stack& s : stacks) {
    const NodeId u = s.members.front();
    for (NodeId m : s.members) {
      unit[m] = u;
      place[u] = std::max(place[u], place[m]);
    }
    members[u] = s.members;
  }
  // Kahn's algorithm over units: waiting[u] counts the nodes outside u its members read
  // that have not run yet.
  std::vector<size_t> waiting(g.size(), 0);
  std::vector<NodeId> read;
  for (NodeId v : order) {
    if (unit[v] != v) continue;
    read.clear();
    for (NodeId m : members[v]) {
      for (NodeId in : g.inputs(m)) {
        if (unit[in] != v) read.push_back(in);
      }
    }
    std::sort(read.begin(), read.end());
    waiting[v] = static_cast<size_t>(std::unique(read.begin(), read.end()) - read.begin());
  }
  using Ready = std::pair<size_t, NodeId>;  // (place, unit), earliest place first
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  for (NodeId v : order) {
    if (unit[v] == v && waiting[v] == 0) ready.emplace(place[v], v);
  }
  std::vector<NodeId> out, readers;
  while (!ready.empty()) {
    const NodeId u = ready.top().second;
    ready.pop();
    for (NodeId m : members[u]) {
      out.push_back(m);
      readers.clear();
      for (NodeId c : g.consumers(m)) {
        if (unit[c] != u) readers.push_back(unit[c]);
      }
      std::sort(readers.begin(), readers.end());
      readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
      for (NodeId r : readers) {
        if (--waiting[r] == 0) ready.emplace(place[r], r);
      }
    }
  }
  if (out.size() != order.size()) out.clear();
  return out;
}

std::vector<Stack> plan_stacks(const Graph& g, std::vector<NodeId>& order, const std::vector<ValueInfo>& values,
                               const std::vector<char>& needs_grad) {
  std::vector<Stack> stacks;
  std::vector<char> placed(g.size(), 0);
  std::vector<NodeId> stacked = order;
  for (const Stack& candidate : stack_candidates(g, order, values)) {
    Stack s;
    for (size_t i = 0; i < candidate.members.size(); ++i) {
      const NodeId m = candidate.members[i], x = candidate.firsts[i];
      if (placed[m] || placed[x] || std::find(s.firsts.begin(), s.firsts.end(), x) != s.firsts.end()) continue;
      if (!s.members.empty() && (needs_grad[m] != needs_grad[s.members[0]] || needs_grad[x] != needs_grad[s.firsts[0]])) {
        continue;
      }
      s.members.push_back(m);
      s.firsts.push_back(x);
      s.rows += values[m].shape[0];
    }
    if (s.members.size() < 2) continue;
    stacks.push_back(s);
    std::vector<NodeId> trial = stacked_order(g, order, stacks);
    if (trial.empty()) {
      stacks.pop_back();
      continue;
    }
    stacked = std::move(trial);
    for (size_t i = 0; i < s.members.size(); ++i) placed[s.members[i]] = placed[s.firsts[i]] = 1;
  }
  order = std::move(stacked);
  return stacks;
}

std::vector<char> gradient_flags(const Graph& g, const std::vector<NodeId>& order, const std::vector<ValueInfo>& values,
                                 const CompileOptions& options) {
  std::vector<char> needs_grad(g.size(), 0);
  for (NodeId v : order) {
    const Node& n = g[v];
    if (is_param(n)) {
      needs_grad[v] = options.param_grads && !n.has(kFrozen);
    } else if (is_input(n)) {
      const auto& named = options.grad_inputs_named;
      needs_grad[v] = (options.grad_inputs || std::find(named.begin(), named.end(), n.name) != named.end()) &&
                      values[v].dtype == DType::Real;
    } else if (!n.op->leaf) {
      const std::vector<NodeId> ins = g.inputs(v);
      for (size_t i = 0; i < ins.size(); ++i) {
        if (n.op->differentiable(i) && needs_grad[ins[i]]) needs_grad[v] = 1;
      }
    }
  }
  return needs_grad;
}
}  // namespace pens::tape_plan
