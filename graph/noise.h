// Noise kinds: how a noise annotation on a node becomes ops in a child model. The set is
// open: a kind is a name, a parameter schema and a function that perturbs one value in
// one child; register a new one with NoiseRegistry::register_global() and the perturb
// pass uses it without being edited.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "graph/attributes.h"
#include "graph/graph.h"
#include "graph/named_table.h"

namespace pens {

// What a noise kind sees when it perturbs a node's value in one child.
class NoiseSite {
 public:
  NoiseSite(Graph& graph, const Node& annotated, NodeId value, int child, uint64_t seed,
            size_t index, std::map<std::string, NodeId>* subspace_draws)
      : graph(graph), annotated(annotated), value(value), child(child), seed(seed),
        index(index), subspace_draws_(subspace_draws) {}

  Graph& graph;           // the graph being built (the pseudo-ensemble)
  const Node& annotated;  // the annotated node, as the parent has it
  NodeId value;           // the child's value of that node so far
  int child;              // 1..K
  uint64_t seed;          // the pseudo-ensemble's seed
  size_t index;           // which of the node's annotations this is

  // The noise stream of this annotation in this child.
  uint64_t stream() const;

  // Adds a node for this child's noise: named "<child prefix><node>~<tag>", role "noise".
  NodeId add(std::string_view op, const std::vector<NodeId>& inputs, Attributes attrs,
             std::string_view tag);
  // The indices kept of a latent group in this child: drawn once per child and step,
  // shared by every annotation of the group. Sizes must agree across the group.
  NodeId subspace_indices(const std::string& group, int64_t size, int64_t keep);

 private:
  std::map<std::string, NodeId>* subspace_draws_;
};

struct NoiseKind {
  std::string name;
  std::string summary;
  std::vector<AttrSpec> params;
  bool parameters_only = false;  // fuzz and subspace act on parameters
  // Returns the perturbed value.
  std::function<NodeId(NoiseSite&, const Attributes&)> apply;
};

class NoiseRegistry {
 public:
  static const NoiseRegistry& global();
  static void register_global(NoiseKind kind);

  const NoiseKind* find(std::string_view name) const { return kinds_.find(name); }
  const NoiseKind& at(std::string_view name) const { return kinds_.at(name); }  // "unknown noise kind 'x'"
  std::vector<const NoiseKind*> all() const { return kinds_.all(); }

 private:
  static NoiseRegistry& mutable_global();
  NamedTable<NoiseKind> kinds_{"noise kind", ""};
};

// Checks an annotation against its kind's schema (naming the node), fills defaults.
void normalize_noise(const Node& node, NoiseAnnotation& annotation);

// Attaches a checked annotation to a node; annotations apply in the order attached.
void add_noise(Graph& g, NodeId v, std::string kind, Attributes params = {});

// The child prefix of node names: "c1/", "c2/", ...
std::string child_prefix(int child);

// The stream of a noise source: a function of the pseudo-ensemble's seed, the child and
// the source's name, so a pseudo-ensemble built twice with one seed draws the same noise.
uint64_t noise_stream(uint64_t seed, int child, std::string_view source);

}  // namespace pens
