// Gradient-check cases: each op builds small graphs in which the op under test is fed
// by parameters (its real inputs, with random values) and constants (its index inputs).
// The gradient checker (autodiff/gradcheck.h) compares the full Jacobian of the op's
// output with respect to every parameter against central differences in double
// precision. `pens gradcheck --all-ops` and the test suite run the same cases.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace pens {

struct OpDef;

struct CheckCase {
  std::string label;  // "matmul[transpose_b=1]"
  Graph graph;        // the op under test is the node flagged kOutput
  std::map<std::string, std::vector<double>> values;  // parameter and input values
};

using Sampler = std::function<double(std::mt19937_64&)>;

// Uniform in [lo, hi].
Sampler uniform(double lo, double hi);
// Uniform in [lo, hi], at least `margin` away from each kink in `kinks`, so that a
// finite difference never straddles a point where the derivative jumps.
Sampler away_from(double lo, double hi, std::vector<double> kinks, double margin);

class CheckBuilder {
 public:
  CheckBuilder(const OpDef& op, uint64_t seed);

  // A real input of the op under test: a parameter with random values.
  NodeId real(Shape shape, const Sampler& sampler = uniform(-1.0, 1.0));
  // An index input: a constant with random values in [0, bound).
  NodeId index(Shape shape, int64_t bound);
  // An index input with the given values (to test repeated indices, say).
  NodeId index_values(const std::vector<int64_t>& values);

  // Applies the op under test to `inputs` and closes the case; the next real()/index()
  // starts a new one. A leaf op (input, parameter) is checked as itself, with random
  // values.
  void check(const std::vector<NodeId>& inputs, Attributes attrs = {}, std::string label = {});

  std::vector<CheckCase> take() { return std::move(done_); }

 private:
  double draw(const Sampler& s) { return s(rng_); }
  const OpDef& op_;
  std::mt19937_64 rng_;
  CheckCase current_;
  std::vector<CheckCase> done_;
};

// All cases of an op (calls its check function).
std::vector<CheckCase> check_cases(const OpDef& op, uint64_t seed = 20141208);

}  // namespace pens
