// How a tape is planned when it is compiled (autodiff/tape.cpp's alone: not an installed
// header): which nodes carry gradients, and which products run as one call over stacked
// rows (CompileOptions::stack), with the order that allows.
#pragma once

#include <cstdint>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/graph/graph.h"
#include "pens/ops/ir/value.h"

namespace pens::tape_plan {

// Nodes the tape computes as one call over their stacked rows (CompileOptions::stack).
struct Stack {
  std::vector<NodeId> members;  // in the order of their rows in the blocks
  std::vector<NodeId> firsts;   // each member's first input
  int64_t rows = 0;             // the members' rows together
};

// Nodes that may stack, grouped by what they share: the op, its attributes and every input
// but the first, which must be a matrix and not a parameter.
std::vector<Stack> stack_candidates(const Graph& g, const std::vector<NodeId>& order,
                                    const std::vector<ValueInfo>& values);

// A topological order of g in which each stack's members come one after another, and the
// rest as near `order` as that allows; empty when the stacks would make a cycle (a member
// reaching another member, directly or through another stack).
std::vector<NodeId> stacked_order(const Graph& g, const std::vector<NodeId>& order, const std::vector<Stack>& stacks);

// The stacks to run, taken from the candidates in order: a member joins while neither its
// value nor its first input lies in a block already and it needs gradients as the stack's
// first member does; a stack of two or more is kept while the graph stays acyclic.
// `order` becomes the order to run in.
std::vector<Stack> plan_stacks(const Graph& g, std::vector<NodeId>& order, const std::vector<ValueInfo>& values,
                               const std::vector<char>& needs_grad);

// Which nodes carry a gradient: trainable parameters, real inputs when asked, and every
// node that reads one of those through a differentiable slot.
std::vector<char> gradient_flags(const Graph& g, const std::vector<NodeId>& order, const std::vector<ValueInfo>& values,
                                 const CompileOptions& options);

}  // namespace pens::tape_plan
