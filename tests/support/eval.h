// Evaluates a graph once, in double precision, for tests that check values.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "pens/graph/graph.h"
#include "pens/ops/random.h"

namespace pens::testing {

using Values = std::map<std::string, std::vector<double>>;

// Initializes parameters from their init attributes (seed 1), feeds `values` (inputs and
// parameters by name, overriding), runs forward, returns node `out`.
std::vector<double> evaluate(const Graph& g, const Values& values, const std::string& out,
                             int64_t batch = 1, NoiseKey key = {});

// Every parameter of `g` drawn uniformly from [-0.5, 0.5) by a generator seeded with
// `seed`, in the graph's node order: values for evaluate() and gradcheck.
Values random_params(const Graph& g, uint64_t seed);

}  // namespace pens::testing
