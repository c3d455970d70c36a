// The pens graph IR: a DAG whose vertices are Nodes and whose edges carry the input slot
// they feed. The nodes are held here, in insertion order; the edges are a Boost.Graph
// adjacency list kept out of this header (graph/topology.h), so that the many files that
// only name a graph do not parse Boost.Graph. A Graph is a value: passes copy it and
// return new graphs, nothing edits a graph it was handed.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pens/ops/ir/node.h"
#include "pens/ops/ir/shape.h"
#include "pens/ops/ir/value.h"

namespace pens {

class Graph;

// What a probe node (op "probe") computes: a value found from gradients inside the
// forward pass. Its noise kind's probe function (graph/noise.h) asks for the gradient of
// `graph`'s objective with respect to `graph`'s input named like the probe node, at
// values it chooses, and writes the probe's value from them (VAT's adversarial direction
// by power iteration). The tape runs `graph` on a tape of its own (autodiff/tape.h);
// `graph`'s other inputs are the outer graph's inputs of the same names.
struct ProbeBody {
  std::string kind;    // a noise kind with a probe function
  Attributes params;   // the annotation's parameters
  int child = 0;       // the child whose noise it is
  std::shared_ptr<const Graph> graph;  // null until the pseudo-ensemble builder adds it
};

// A moving average the trainer keeps after every update: parameter `param` becomes
// decay · param + (1 − decay) · the value of node `source` (a batch statistic of the clean
// pass for batch normalisation's running statistics, a parameter for a mean teacher's
// weights). `param` must be a frozen parameter of the shape of `source`'s value, free of
// the batch. With `at_inference`, inference graphs (build_inference) read `param` where
// the graph reads `source`: the running statistics replace the batch's, the teacher's
// weights the student's. `child` k > 0 follows child k's copy of a computed `source` in a
// pseudo-ensemble's training graph instead of the clean parent's (a mean teacher's own
// batch statistics, which its averaged weights meet at inference).
struct MovingAverage {
  std::string param;
  std::string source;
  double decay = 0.99;
  bool at_inference = true;
  int64_t child = 0;
  bool operator==(const MovingAverage&) const = default;
};

class Graph {
 public:
  // A node's index in insertion order (Boost.Graph's vertex descriptor for vecS storage).
  using NodeId = std::size_t;
  // The edges: a Boost.Graph adjacency list, defined in graph/topology.h for the graph
  // layer's own algorithms (searches, filtered copies).
  struct Topology;

  Graph();
  Graph(const Graph& other);
  Graph(Graph&& other) noexcept;
  Graph& operator=(const Graph& other);
  Graph& operator=(Graph&& other) noexcept;
  ~Graph();

  // Adds a node applying `op` to `inputs`. Attributes are checked against the op's
  // schema (unknown names, wrong types, missing required ones) and defaults filled in.
  // An empty name gets a unique one derived from the op ("relu_3").
  NodeId add(std::string_view op, const std::vector<NodeId>& inputs, Attributes attrs = {},
             std::string name = {});

  // Leaves, the common cases spelled out. A kBatch dimension in an input shape is bound
  // to the batch size when the graph is compiled.
  NodeId input(std::string name, Shape shape, DType dtype = DType::Real);
  NodeId param(std::string name, Shape shape, Attributes init = {});

  // Adds a node without inputs, for readers that meet a node before its inputs exist:
  // connect it with set_inputs(); verify() checks arity and cycles.
  NodeId add_unwired(std::string_view op, Attributes attrs, std::string name);

  // Replaces the inputs of an existing node. Used by readers and passes that must
  // create nodes before their inputs exist; verify() catches any cycle this creates.
  void set_inputs(NodeId v, const std::vector<NodeId>& inputs);

  std::vector<NodeId> inputs(NodeId v) const;     // in slot order
  std::vector<NodeId> consumers(NodeId v) const;  // nodes that read v, each once
  // Every node that reads `from` reads `to` in its place, in the same slots.
  void replace_uses(NodeId from, NodeId to);

  const Node& node(NodeId v) const { return nodes_[v]; }
  Node& node(NodeId v) { return nodes_[v]; }
  const Node& operator[](NodeId v) const { return nodes_[v]; }
  const Node& operator[](std::string_view name) const { return nodes_[at(name)]; }

  std::optional<NodeId> find(std::string_view name) const;
  NodeId at(std::string_view name) const;  // throws an Error naming the missing node
  // "no node named 'logit' (did you mean 'logits'?)": the error of a failed lookup, with
  // the nearest names (and every name, in a graph of a dozen nodes or fewer).
  std::string no_node_named(std::string_view name) const;
  // Whether a leaf declares the batch dimension (kBatch) in its shape: a tree's graph,
  // whose sizes all come from the tree, does not.
  bool declares_batch() const;
  void set_flag(NodeId v, NodeFlag f) { nodes_[v].flags |= f; }
  void rename(NodeId v, std::string name);

  size_t size() const { return nodes_.size(); }
  std::vector<NodeId> nodes() const;                  // in insertion order
  std::vector<NodeId> nodes_with(NodeFlag f) const;   // in insertion order
  // Topological order (inputs before consumers). Throws an Error naming a node on a
  // cycle when there is one.
  std::vector<NodeId> topological_order() const;
  // The slots of the edges into v, in the order the edges were added, into `slots`
  // (cleared first; reused across nodes, it stops allocating). Verification checks they
  // are 0..n-1 with none twice, which inputs() cannot tell.
  void input_slots(NodeId v, std::vector<int>& slots) const;

  const Topology& topology() const;

  // The bodies of probe nodes, by the probe node's name; copy_subgraph and rename keep
  // them with their nodes.
  void set_probe(NodeId v, ProbeBody body) { probes_[nodes_[v].name] = std::move(body); }
  const ProbeBody* probe(std::string_view node) const;
  const std::map<std::string, ProbeBody, std::less<>>& probes() const { return probes_; }

  // The moving averages (MovingAverage), in the order declared; verify() checks them.
  // copy_subgraph keeps those whose source and parameter it keeps; rename follows them.
  void add_average(MovingAverage average) { averages_.push_back(std::move(average)); }
  void clear_averages() { averages_.clear(); }
  void set_averages(std::vector<MovingAverage> averages) { averages_ = std::move(averages); }
  const std::vector<MovingAverage>& averages() const { return averages_; }

 private:
  friend Graph copy_subgraph(const Graph&, const std::vector<char>&, std::vector<NodeId>*);
  std::string fresh_name(std::string_view op);
  Topology& edges();  // the topology to change (a graph moved from gets an empty one)
  std::vector<Node> nodes_;
  std::unique_ptr<Topology> topology_;  // null in a graph moved from: no edges
  std::unordered_map<std::string, NodeId> by_name_;
  size_t next_auto_name_ = 0;
  std::map<std::string, ProbeBody, std::less<>> probes_;
  std::vector<MovingAverage> averages_;
};

using NodeId = Graph::NodeId;

// Marks, by NodeId, `out` and every node it depends on.
std::vector<char> ancestors(const Graph& g, NodeId out);

// The subgraph of the nodes marked in `keep` (indexed by NodeId), with the edges among
// them, as a new graph. `old_to_new`, when given, receives each kept node's new id.
Graph copy_subgraph(const Graph& g, const std::vector<char>& keep,
                    std::vector<NodeId>* old_to_new = nullptr);

bool is_input(const Node& n);
bool is_param(const Node& n);
bool is_constant(const Node& n);
// Whether a moving average follows a computed value of g (a batch statistic, kept as a
// running statistic) rather than a parameter (a teacher's copy of a weight).
bool of_batch_statistic(const Graph& g, const MovingAverage& a);

}  // namespace pens
