// The perturb pass: from a parent graph to K children that share its parameters, plus
// the supervised loss on the network the spec names. See graph/pseudo_ensemble.h.
#include <algorithm>
#include <map>
#include <set>

#include "pens/graph/infer.h"
#include "pens/graph/noise.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/op.h"

namespace pens {

namespace {

constexpr NodeId kNoNode = static_cast<NodeId>(-1);
// The op whose children read the parent's value instead of computing their own
// (ops/defs/shape_ops.cpp).
constexpr const char* kParentValueOp = "parent_value";

// Marks the non-leaf nodes among `roots` and everything they depend on.
std::vector<char> non_leaf_ancestors(const Graph& g, const std::vector<NodeId>& order,
                                     const std::vector<NodeId>& roots) {
  std::vector<char> marked(g.size(), 0);
  for (NodeId r : roots) marked[r] = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!marked[*it]) continue;
    for (NodeId u : g.inputs(*it)) marked[u] = 1;
  }
  for (NodeId v : order) {
    if (g[v].op->leaf) marked[v] = 0;
  }
  return marked;
}

NodeId copy_node(Graph& g, const Node& n, const std::vector<NodeId>& inputs, std::string name,
                 const std::string& role) {
  const NodeId c = g.add(n.op->name, inputs, n.attrs, std::move(name));
  g.node(c).layer = n.layer;
  g.node(c).role = role;
  return c;
}

// The parent's network and its K children. The graph starts as the parent without its
// loss head (every leaf, and the network: the non-leaf ancestors of its outputs); the
// children are added to it.
struct Children {
  Graph graph;
  std::vector<NodeId> order;                // the parent's topological order
  std::vector<char> network;                // by parent id
  std::vector<std::vector<NodeId>> reads;   // [k][parent id]: the value child k reads (k = 0: the parent)
  std::vector<std::map<std::string, std::string>> taps;  // [k - 1]: parent node -> child k's copy
};

struct ChildOptions {
  // false leaves out the noise found from gradients (a training objective's), as
  // Monte-Carlo inference does.
  bool probes = true;
  // Child `teacher` (0: none) reads the moving average of each parameter that has one in
  // the parameter's place.
  int64_t teacher = 0;
  // The children (1..K) that read the clean parent's batch statistics (the computed
  // sources of moving averages), held constant, instead of computing their own.
  std::set<int64_t> parent_statistics = {};
  // Nodes the children compute besides the ancestors of the outputs (penalized nodes that
  // no output reads, such as a ladder network's decoder).
  std::vector<std::string> roots = {};
};

Children make_children(const Graph& parent, int64_t children, const ChildOptions& options) {
  Children c;
  c.order = parent.topological_order();
  std::vector<NodeId> outputs = parent.nodes_with(kOutput);
  if (outputs.empty()) {
    fail("the parent graph marks no output node: flag the network's output (kOutput) so the "
         "perturb pass knows what the children compute");
  }
  if (!options.roots.empty()) {
    // A root that is not there, a leaf or part of the loss head (reading the labels) is not
    // added: the penalty pass names what is wrong with it.
    const std::vector<char> network = non_leaf_ancestors(parent, c.order, outputs);
    const std::vector<char> head = non_leaf_ancestors(parent, c.order, parent.nodes_with(kLoss));
    for (const std::string& root : options.roots) {
      const auto v = parent.find(root);
      if (v && !parent[*v].op->leaf && (network[*v] || !head[*v])) outputs.push_back(*v);
    }
  }
  for (NodeId v : c.order) {
    for (size_t i = 0; i < parent[v].noise.size(); ++i) {
      for (int64_t k : parent[v].noise[i].children) {
        if (k > children) {
          throw Error(cat("node '", parent[v].name, "', noise ", i, " (", parent[v].noise[i].kind, "): children lists ",
                          "child ", k, ", and the pseudo-ensemble has ", children),
                      parent[v].name, cat("noise/", i));
        }
      }
    }
  }
  c.network = non_leaf_ancestors(parent, c.order, outputs);
  std::vector<char> keep = c.network;
  for (NodeId v : c.order) keep[v] = keep[v] || parent[v].op->leaf;
  c.reads.assign(static_cast<size_t>(children) + 1, {});
  c.taps.assign(static_cast<size_t>(children), {});
  c.graph = copy_subgraph(parent, keep, &c.reads[0]);
  for (NodeId v : c.graph.nodes()) c.graph.node(v).flags &= ~static_cast<uint32_t>(kLoss);

  std::map<NodeId, NodeId> averaged;  // parent parameter -> its moving average, in c.graph
  if (options.teacher > 0) {
    for (const MovingAverage& a : parent.averages()) {
      const NodeId source = parent.at(a.source);
      if (is_param(parent[source])) averaged[source] = c.reads[0][parent.at(a.param)];
    }
    if (averaged.empty()) {
      throw Error("pseudo_ensemble.teacher: the model keeps no moving average of a parameter for the teacher to read "
                  "(pens new mlp --teacher DECAY, or add_teacher in models/teacher.h)",
                  "", "teacher");
    }
  }

  // Batch statistics the children take from the parent, through one stop_gradient each.
  std::map<NodeId, NodeId> statistics;
  if (!options.parent_statistics.empty()) {
    for (const MovingAverage& a : parent.averages()) {
      const NodeId source = parent.at(a.source);
      if (is_param(parent[source]) || !c.network[source]) continue;
      const NodeId fixed = c.graph.add("stop_gradient", {c.reads[0][source]}, {}, a.source + "~parent");
      c.graph.node(fixed).layer = parent[source].layer;
      statistics[source] = fixed;
    }
  }

  for (int k = 1; k <= children; ++k) {
    std::map<std::string, NodeId> subspace_draws;
    std::vector<NodeId>& reads = c.reads[static_cast<size_t>(k)];
    reads.assign(parent.size(), kNoNode);
    for (NodeId v : c.order) {
      const Node& n = parent[v];
      NodeId value;
      if (n.op->leaf) {
        // Inputs, parameters and constants are shared; a teacher reads averaged parameters.
        const auto it = k == options.teacher ? averaged.find(v) : averaged.end();
        value = it == averaged.end() ? c.reads[0][v] : it->second;
      } else if (auto it = statistics.find(v); it != statistics.end() && options.parent_statistics.contains(k)) {
        value = it->second;
      } else if (c.network[v] && n.op->name == kParentValueOp) {
        value = c.reads[0][v];  // what the parent computed, gradient included
      } else if (c.network[v]) {
        std::vector<NodeId> inputs;
        for (NodeId u : parent.inputs(v)) inputs.push_back(reads[u]);
        value = copy_node(c.graph, n, inputs, child_prefix(k) + n.name, cat("child:", k));
        c.taps[static_cast<size_t>(k - 1)].emplace(n.name, c.graph[value].name);
        // A stochastic op of the parent draws differently in every child.
        if (n.op->stochastic) c.graph.node(value).attrs.set("stream", site_stream(k, n.name));
      } else {
        continue;  // the loss head, attached separately
      }
      for (size_t i = 0; i < n.noise.size(); ++i) {
        const NoiseKind& kind = NoiseRegistry::global().at(n.noise[i].kind);
        if ((kind.probe && !options.probes) || !n.noise[i].applies_to(k)) continue;
        NoiseSite site(c.graph, n, value, k, i, &subspace_draws);
        try {
          value = kind.apply(site, n.noise[i].params);
        } catch (const Error& e) {
          // Named as the model file has it: the annotated node and the annotation.
          throw Error(cat("node '", n.name, "', noise ", i, " (", n.noise[i].kind, "): ", e.what()), n.name,
                      cat("noise/", i));
        }
      }
      reads[v] = value;
    }
  }
  // An average of a child's value follows that child's copy of its source.
  std::vector<MovingAverage> averages = c.graph.averages();
  for (MovingAverage& a : averages) {
    if (a.child == 0) continue;
    const std::string what = cat("moving average into '", a.param, "' (child ", a.child, ")");
    if (a.child > children) throw Error(cat(what, ": no such child (children: ", children, ")"), a.param);
    const auto& taps = c.taps[static_cast<size_t>(a.child - 1)];
    const auto it = taps.find(a.source);
    if (it == taps.end()) {
      throw Error(cat(what, ": child ", a.child, " computes no '", a.source, "' of its own",
                      options.parent_statistics.contains(a.child) ? " (batch_statistics 'parent' gives it the parent's)" : ""),
                  a.param);
    }
    a.source = it->second;
  }
  c.graph.set_averages(std::move(averages));
  return c;
}

// Copies the parent's loss head (the non-network nodes its loss nodes depend on) onto the
// network `net` (0: the parent, k: child k), on the labeled rows when there are unlabeled
// ones. Returns the copies of the loss nodes.
std::vector<NodeId> attach_loss_head(Children& c, const Graph& parent, const std::vector<char>& head,
                                     int net, int64_t labeled_rows, std::map<std::string, std::string>* copied) {
  Graph& g = c.graph;
  const std::string tag = net == 0 ? std::string("parent") : cat("c", net);
  const std::string prefix = "loss/" + tag + "/";
  const std::string role = net == 0 ? std::string("parent") : cat("child:", net);
  std::vector<NodeId> copies(parent.size(), kNoNode);
  std::map<NodeId, NodeId> labeled_view;
  std::vector<NodeId> losses;
  for (NodeId v : c.order) {
    if (!head[v]) continue;
    if (net != 0 && parent[v].op->name == kParentValueOp) {
      throw Error(cat("node '", parent[v].name, "' (parent_value) is in the loss head: children read the parent's "
                      "value only of network nodes (ancestors of an output or of a penalized node)"),
                  parent[v].name);
    }
    std::vector<NodeId> inputs;
    for (NodeId u : parent.inputs(v)) {
      if (head[u]) {
        inputs.push_back(copies[u]);
      } else if (c.network[u]) {
        NodeId value = c.reads[static_cast<size_t>(net)][u];
        if (labeled_rows >= 0) {
          auto it = labeled_view.find(u);
          if (it == labeled_view.end()) {
            const NodeId s = g.add("slice", {value},
                                   {{"axis", int64_t{0}}, {"begin", int64_t{0}}, {"end", labeled_rows}},
                                   prefix + parent[u].name + "[labeled]");
            g.node(s).role = role;
            it = labeled_view.emplace(u, s).first;
          }
          value = it->second;
        }
        inputs.push_back(value);
      } else {
        inputs.push_back(c.reads[0][u]);  // a leaf: the labels
      }
    }
    copies[v] = copy_node(g, parent[v], inputs, prefix + parent[v].name, role);
    copied->emplace(parent[v].name, g[copies[v]].name);
    if (parent[v].has(kLoss)) losses.push_back(copies[v]);
  }
  return losses;
}

}  // namespace

Perturbed PerturbPass::perturb(const Graph& parent) const {
  spec_.validate();
  std::vector<std::string> penalized;
  for (const PenaltyTerm& t : spec_.penalties) penalized.push_back(t.node);
  std::set<int64_t> parent_statistics;
  for (int64_t k = 1; k <= spec_.children; ++k) {
    if (spec_.batch_statistics_of(k) == "parent") parent_statistics.insert(k);
  }
  Children c = make_children(parent, spec_.children,
                             {.teacher = spec_.teacher, .parent_statistics = parent_statistics, .roots = penalized});
  Graph& g = c.graph;
  const std::vector<NodeId> losses = parent.nodes_with(kLoss);
  // A training graph's result is its objective: the clean parent stays only where the
  // loss or a penalty reads it.
  for (NodeId v : g.nodes()) g.node(v).flags &= ~static_cast<uint32_t>(kOutput);
  if (losses.empty()) fail("the parent graph marks no loss node: nothing to train the pseudo-ensemble on");

  std::vector<char> head = non_leaf_ancestors(parent, c.order, losses);
  for (NodeId v : c.order) head[v] = head[v] && !c.network[v];

  if (options_.labeled_rows >= 0) {
    if (options_.labeled_rows == 0) fail("labeled_rows must be positive (or -1: every row labeled)");
    // Leaves only the loss head reads (the labels) hold the labeled rows only.
    std::set<NodeId> head_leaves;
    for (NodeId v : c.order) {
      if (!head[v]) continue;
      for (NodeId u : parent.inputs(v)) {
        if (is_input(parent[u])) head_leaves.insert(u);
      }
    }
    for (NodeId u : head_leaves) {
      bool used_by_network = false;
      for (NodeId consumer : parent.consumers(u)) used_by_network |= c.network[consumer] != 0;
      std::vector<int64_t> shape = parent[u].attrs.get_ints("shape");
      if (used_by_network || shape.empty() || shape[0] != kBatch) continue;
      shape[0] = options_.labeled_rows;
      g.node(c.reads[0][u]).attrs.set("shape", shape);
    }
  }

  std::vector<int> nets;
  if (spec_.loss_on == "parent") nets = {0};
  if (spec_.loss_on == "child") nets = {1};
  if (spec_.loss_on == "children") {
    for (int k = 1; k <= spec_.children; ++k) nets.push_back(k);
  }
  Perturbed out;
  for (int net : nets) {
    std::map<std::string, std::string> head_copies;
    for (NodeId loss : attach_loss_head(c, parent, head, net, options_.labeled_rows, &head_copies)) {
      NodeId term = loss;
      if (nets.size() > 1) {  // eq. 1 estimated by the mean over the children
        term = g.add("scale", {loss}, {{"factor", 1.0 / static_cast<double>(nets.size())}},
                     g[loss].name + "/mean");
        g.node(term).role = g[loss].role;
      }
      g.set_flag(term, kLoss);
      out.losses.push_back(g[term].name);
    }
    if (out.loss_head.empty()) out.loss_head = std::move(head_copies);
  }
  out.graph = std::move(g);
  out.taps = std::move(c.taps);
  return out;
}

PseudoEnsemble build_pseudo_ensemble(const Graph& parent, const PseudoEnsembleSpec& spec,
                                     const EnsembleOptions& options) {
  // With labeled rows the batch must have some unlabeled ones too.
  const int64_t batch = std::max(kVerifyBatch, options.labeled_rows + 1);
  PseudoEnsemble out;
  out.spec = spec;
  // Labeled and unlabeled rows normalised apart: the parent is split before the children copy it.
  const Graph split = !spec.statistics_by_part ? parent : within_pass("split-statistics", [&] {
    Graph g = SplitStatistics(options.labeled_rows).run(parent);
    verify(g, batch);
    return g;
  });
  Perturbed perturbed = within_pass("perturb", [&] {
    Perturbed p = PerturbPass(spec, options).perturb(split);
    verify(p.graph, batch);
    return p;
  });
  out.penalties = within_pass("penalties", [&] {
    std::vector<PenaltyHandle> handles = add_penalties(perturbed, spec, options);
    verify(perturbed.graph, batch);
    return handles;
  });
  within_pass("probes", [&] {
    std::vector<std::string> outputs;
    for (NodeId v : parent.nodes_with(kOutput)) outputs.push_back(parent[v].name);
    add_probe_bodies(perturbed, outputs, spec.smoothing, batch);
  });
  out.losses = std::move(perturbed.losses);
  out.loss_head = std::move(perturbed.loss_head);
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(std::make_unique<LookupFirst>());
  passes.push_back(std::make_unique<PruneDeadNodes>());
  if (options.restrict_rows) passes.push_back(std::make_unique<RestrictRows>());
  out.graph = run_passes(perturbed.graph, passes, batch);
  for (PenaltyHandle& h : out.penalties) {
    if (h.pairing != "parent-child") continue;
    const std::string& side = h.term.target.empty() ? h.term.node : h.term.target;
    if (auto p = out.graph.find(side); p && out.graph[*p].role == "parent") h.parent = side;
  }
  return out;
}

std::vector<std::vector<std::string>> perturb_cell(const Graph& cell, const std::vector<std::string>& ports, Graph* out,
                                                   int64_t children) {
  for (NodeId v : cell.nodes()) {
    for (const NoiseAnnotation& a : cell[v].noise) {
      if (NoiseRegistry::global().at(a.kind).probe != nullptr) {
        fail("node '", cell[v].name, "': noise '", a.kind, "' is found from the gradient of a training objective, ",
             "which a cell does not have; perturb the unrolled graph instead");
      }
    }
  }
  Graph marked = cell;
  for (NodeId v : marked.nodes()) marked.node(v).flags &= ~static_cast<uint32_t>(kOutput | kLoss);
  for (const std::string& p : ports) marked.set_flag(marked.at(p), kOutput);
  Children c = make_children(marked, children, {});
  std::vector<std::vector<std::string>> child_ports(static_cast<size_t>(children));
  for (size_t k = 0; k < child_ports.size(); ++k) {
    for (const std::string& p : ports) child_ports[k].push_back(c.graph[c.reads[k + 1][marked.at(p)]].name);
  }
  *out = std::move(c.graph);
  return child_ports;
}

namespace {
// Which of the moving averages used at inference a graph reads in place of their sources:
// all of them (running statistics for the batch's, a teacher's weights for the
// student's), or the averages of parameters alone (batch statistics still computed).
enum class AveragesRead { All, Parameters };

// The parent reading those averages. Nothing updates such a graph's averages: it keeps none.
Graph read_averages(const Graph& parent, AveragesRead which) {
  Graph g = parent;
  g.clear_averages();
  for (const MovingAverage& a : parent.averages()) {
    if (a.at_inference && (which == AveragesRead::All || !of_batch_statistic(parent, a))) {
      g.replace_uses(g.at(a.source), g.at(a.param));
    }
  }
  return g;
}

// g without what no output or loss reads.
Graph prune(const Graph& g) {
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(std::make_unique<LookupFirst>());
  passes.push_back(std::make_unique<PruneDeadNodes>());
  return run_passes(g, passes);
}
}  // namespace

Graph build_inference(const Graph& model, int64_t samples) {
  if (samples < 0) fail("Monte-Carlo samples must be >= 0, got ", samples);
  const Graph parent = read_averages(model, AveragesRead::All);
  Graph g;
  if (samples == 0) {
    g = parent;
    for (NodeId v : g.nodes()) g.node(v).flags &= ~static_cast<uint32_t>(kLoss);
  } else {
    for (NodeId v : parent.nodes()) {
      for (const NoiseAnnotation& a : parent[v].noise) {
        if (!a.children.empty()) {
          fail("node '", parent[v].name, "': its ", a.kind, " noise is for some children only, so the children are of ",
               "different kinds and a Monte-Carlo sample is none of them; evaluate the parent (samples 0)");
        }
      }
    }
    Children c = make_children(parent, samples, {.probes = false});
    g = std::move(c.graph);
    for (NodeId out : parent.nodes_with(kOutput)) {
      NodeId total = kNoNode;
      for (int k = 1; k <= samples; ++k) {
        const NodeId p = g.add("softmax", {c.reads[static_cast<size_t>(k)][out]}, {},
                               cat("mc/", parent[out].name, "/p", k));
        total = total == kNoNode ? p : g.add("add", {total, p}, {}, cat("mc/", parent[out].name, "/sum", k));
      }
      // Named for what it holds: the mean of the samples' class probabilities, not logits.
      const NodeId mean = g.add("scale", {total}, {{"factor", 1.0 / static_cast<double>(samples)}},
                                cat("mc/", parent[out].name, "/probabilities"));
      g.node(c.reads[0][out]).flags &= ~static_cast<uint32_t>(kOutput);
      g.set_flag(mean, kOutput);
    }
  }
  return prune(g);
}

Graph build_statistics(const Graph& model) {
  Graph g = read_averages(model, AveragesRead::Parameters);
  for (NodeId v : g.nodes()) g.node(v).flags &= ~static_cast<uint32_t>(kLoss | kOutput);
  bool any = false;
  for (const MovingAverage& a : model.averages()) {
    if (!a.at_inference || !of_batch_statistic(model, a)) continue;
    g.set_flag(g.at(a.source), kOutput);
    any = true;
  }
  if (!any) fail("the model has no moving average of a batch statistic read at inference: nothing to measure");
  return prune(g);
}

}  // namespace pens
