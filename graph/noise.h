// Noise kinds: how a noise annotation on a node becomes ops in a child model. The set is
// open: a kind is a name, a parameter schema and a function that perturbs one value in
// one child; register a new one with NoiseRegistry::register_global() and the perturb
// pass uses it without being edited.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pens/graph/graph.h"
#include "pens/ops/ir/attributes.h"
#include "pens/ops/ir/named_table.h"

namespace pens {

// What a noise kind sees when it perturbs a node's value in one child.
class NoiseSite {
 public:
  NoiseSite(Graph& graph, const Node& annotated, NodeId value, int child, size_t index,
            std::map<std::string, NodeId>* subspace_draws)
      : graph(graph), annotated(annotated), value(value), child(child), index(index),
        subspace_draws_(subspace_draws) {}

  Graph& graph;           // the graph being built (the pseudo-ensemble)
  const Node& annotated;  // the annotated node, as the parent has it
  NodeId value;           // the child's value of that node so far
  int child;              // 1..K
  size_t index;           // which of the node's annotations this is

  // The draw site of this annotation in this child: the `stream` attribute of the
  // stochastic op the kind adds.
  int64_t stream() const;

  // Adds a node for this child's noise: named "<child prefix><node>~<tag>", role "noise".
  NodeId add(std::string_view op, const std::vector<NodeId>& inputs, Attributes attrs,
             std::string_view tag);
  // The indices kept of a latent group in this child: drawn once per child and step,
  // shared by every annotation of the group. Sizes must agree across the group.
  NodeId subspace_indices(const std::string& group, int64_t size, int64_t keep);
  // Adds this child's probe of the annotated value (op "probe", named
  // "<child prefix><node>~<tag>"): a value of the same shape that the tape computes with
  // the kind's probe function (NoiseKind::probe), held constant in the outer gradient.
  // The pseudo-ensemble builder gives it its body (graph/pseudo_ensemble.h).
  NodeId add_probe(std::string_view tag, const Attributes& params);

 private:
  std::map<std::string, NodeId>* subspace_draws_;
};

// What a kind's probe function sees while the tape computes a probe node: the probe's
// rows (a batch's examples) of `width` elements each, row-major, in double whatever the
// tape's precision.
class PerturbationProbe {
 public:
  virtual ~PerturbationProbe() = default;
  virtual int64_t rows() const = 0;
  virtual int64_t width() const = 0;
  // The gradient of the body's objective with respect to the perturbation, at `r` (a
  // forward and a backward pass of the body with r added to the probed value). `r` and
  // `grad` may be the same span.
  virtual void gradient(std::span<const double> r, std::span<double> grad) = 0;
  // N(0, 1) draws at the probe's site, keyed by the step's noise key, each row drawing
  // what its row of the global batch draws.
  virtual void normal(std::span<double> out) = 0;
  // Room for a probe function beyond its output: buffer `which` (0 or 1) of rows() x
  // width() values, kept from call to call (its contents are what the last call left), so
  // that a step allocates nothing.
  virtual std::span<double> scratch(int which) = 0;
};

struct NoiseKind {
  static constexpr const char* kWhat = "noise kind";
  std::string name;
  std::string summary;
  std::vector<AttrSpec> params;
  bool parameters_only = false;  // fuzz and subspace act on parameters
  // Returns the perturbed value.
  std::function<NodeId(NoiseSite&, const Attributes&)> apply;
  // Kinds whose perturbation is found from gradients (apply adds a probe node): writes
  // the perturbation (rows() x width()) into `out`. Such a kind has a String parameter
  // "divergence": the penalty kind (graph/penalty.h) the probe's body measures between
  // the clean parent's output and the probed child's.
  std::function<void(PerturbationProbe&, const Attributes&, std::span<double> out)> probe = nullptr;
  // Other names users give this noise ("dropout" for mask): not accepted, but an
  // annotation that uses one is told the kind's name (NamedTable::unknown).
  std::vector<std::string> aliases = {};
};

// NoiseRegistry::global().at("mask"); NoiseRegistry::register_global(kind) adds one.
using NoiseRegistry = Registry<NoiseKind>;
template <>
std::vector<NoiseKind> builtin_kinds<NoiseKind>();

// Checks an annotation against its kind's schema (naming the node), fills defaults.
void normalize_noise(const Node& node, NoiseAnnotation& annotation);

// Attaches a checked annotation to a node; annotations apply in the order attached, in
// every child or in the children listed (numbered from 1).
void add_noise(Graph& g, NodeId v, std::string kind, Attributes params = {}, std::vector<int64_t> children = {});

// The child prefix of node names: "c1/", "c2/", ...
std::string child_prefix(int child);

// The draw site of a noise source in a child: a function of the child and the source's
// name, as a non-negative `stream` attribute. The seed is not part of it: what a site
// draws in a step depends on the tape's NoiseKey (ops/random.h).
int64_t site_stream(int child, std::string_view source);

}  // namespace pens
