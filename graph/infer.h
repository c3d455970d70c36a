// Shape/type inference and structural verification of graphs.
#pragma once

#include <vector>

#include "pens/graph/graph.h"
#include "pens/ops/ir/value.h"

namespace pens {

// The batch size verify() binds when none is given. Not 1, so that a batch dimension
// cannot pass for a broadcastable one.
inline constexpr int64_t kVerifyBatch = 2;

// The value (shape, element type) of every node, indexed by NodeId, with kBatch bound
// to `batch`. Throws an Error naming the first node whose inputs do not fit its op.
std::vector<ValueInfo> infer_values(const Graph& g, int64_t batch);

// 1 for each node (by NodeId) whose value has the batch as its first dimension: the
// first dimension follows the batch from `batch` to batch + 1 while the others stay.
std::vector<char> batch_rows(const Graph& g, int64_t batch);

// Checks everything a graph must satisfy before it can be compiled: no cycles, the
// right number of inputs on every node with no gaps in the slots, attributes that fit
// the op's schema, consistent shapes and types, scalar real loss nodes, parameters
// with fixed shapes, unique names. Throws an Error naming the offending node.
// Returns the inferred values; `order`, when given, receives the topological order.
std::vector<ValueInfo> verify(const Graph& g, int64_t batch = kVerifyBatch,
                              std::vector<NodeId>* order = nullptr);

}  // namespace pens
