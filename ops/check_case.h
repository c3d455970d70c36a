// Gradient-check cases: each op describes small applications of itself, with random
// real inputs (the variables of the check) and index inputs (fixed values). The gradient
// checker (autodiff/gradcheck.h) builds a graph from each case, the real inputs as
// parameters and the index inputs as constants, and compares the full Jacobian of the
// op's output with respect to every real input against central differences in double
// precision. `pens gradcheck --all-ops` and the test suite run the same cases.
//
// A case is plain data, not a graph: ops sit below the graph layer and know nothing of it.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "pens/ops/ir/attributes.h"
#include "pens/ops/ir/shape.h"
#include "pens/ops/ir/value.h"

namespace pens {

struct OpDef;

// One input of a case, with its values (index inputs hold exact integers).
struct CheckInput {
  Shape shape;
  DType dtype = DType::Real;
  std::vector<double> values;
};

struct CheckCase {
  std::string label;                // "matmul[transpose_a=1,transpose_b=0]"
  std::vector<CheckInput> inputs;   // every input the case made, in order of creation
  std::vector<size_t> args;         // the op's input slots, as indices into `inputs`
  Attributes attrs;
  std::vector<double> leaf_values;  // a leaf op (input, parameter) checked as itself: its values
};

using Sampler = std::function<double(std::mt19937_64&)>;

// Uniform in [lo, hi].
Sampler uniform(double lo, double hi);
// Uniform in [lo, hi], at least `margin` away from each kink in `kinks`, so that a
// finite difference never straddles a point where the derivative jumps.
Sampler away_from(double lo, double hi, std::vector<double> kinks, double margin);

class CheckBuilder {
 public:
  // A handle on an input of the case being built.
  using Arg = size_t;

  CheckBuilder(const OpDef& op, uint64_t seed);

  // A real input of the op under test, with random values.
  Arg real(Shape shape, const Sampler& sampler = uniform(-1.0, 1.0));
  // An index input with random values in [0, bound).
  Arg index(Shape shape, int64_t bound);
  // An index input with the given values (to test repeated indices, say).
  Arg index_values(const std::vector<int64_t>& values);

  // Applies the op under test to `args` and closes the case; the next real()/index()
  // starts a new one. A leaf op (input, parameter) is checked as itself, with random
  // values.
  void check(const std::vector<Arg>& args, Attributes attrs = {}, std::string label = {});

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
