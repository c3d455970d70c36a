// A node of a pens graph: one op applied to the outputs of other nodes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "pens/ops/ir/attributes.h"

namespace pens {

struct OpDef;

// A noise annotation says how a child model perturbs this node's output on its way up
// to the nodes that consume it ("mask", "gaussian", "fuzz", "subspace", ...). The parent
// ignores annotations; the perturb pass turns them into stochastic ops in each child, or
// in the children `children` lists (1..K), so that one pseudo-ensemble can hold children
// of different kinds (a ladder network's Gaussian child beside VAT's adversarial child).
struct NoiseAnnotation {
  std::string kind;
  Attributes params;
  std::vector<int64_t> children = {};  // empty: every child
  bool applies_to(int64_t child) const {
    return children.empty() || std::find(children.begin(), children.end(), child) != children.end();
  }
  bool operator==(const NoiseAnnotation& o) const {
    return kind == o.kind && params == o.params && children == o.children;
  }
};

// Flags a user sets on nodes. Whether a node is an input or a parameter is not a flag:
// it follows from its op (see is_input / is_param in graph.h).
enum NodeFlag : uint32_t {
  kOutput = 1u << 0,  // a value the caller reads after forward()
  kLoss = 1u << 1,    // a scalar term of the objective; loss nodes add up
  kFrozen = 1u << 2,  // a parameter that receives no gradient
};

struct Node {
  std::string name;
  const OpDef* op = nullptr;
  Attributes attrs;
  // Which layer of the model the node belongs to ("h1", "out"): pseudo-ensemble taps and
  // penalties are declared per layer, printers group by it.
  std::string layer;
  std::vector<NoiseAnnotation> noise;
  uint32_t flags = 0;
  // Where the node comes from in a pseudo-ensemble: "parent" (the model as written, and
  // everything shared: inputs, parameters), "child:K" (child K's copy), "noise" (a
  // stochastic op a child inserted), "penalty" (agreement penalties, the objective).
  std::string role = "parent";

  bool has(NodeFlag f) const { return (flags & f) != 0; }
};

// Edges carry the input slot they feed: node inputs are ordered (sub(a, b) != sub(b, a)).
struct Edge {
  int slot = 0;
};

}  // namespace pens
