// Gradient checking by central differences in double precision.
//
// For a graph, the checker computes the full Jacobian of its targets (the objective,
// the sum of the loss nodes; in a graph without loss nodes, the nodes flagged kOutput)
// with respect to its variables (every trainable parameter and every real input) twice:
// analytically, one backward pass per target element, and numerically,
// (f(v + h) − f(v − h)) / 2h per variable element, with h = step · max(1, |v|).
// Stochastic ops draw the same noise in every evaluation because the noise key is fixed.
//
// Each entry's error is |analytic − numeric| / max(|analytic|, |numeric|, floor): the
// relative error, except that entries smaller than `floor` are measured against it (a
// relative error of two numbers near zero says nothing). The check passes when every
// entry's error is at most `tolerance`.
//
// Truncation against error: a central difference is off by about c·h² where the function
// curves strongly (V^c's normalisation at zero biases: 4e-5 at h = 1e-5), which a correct
// gradient must not fail on. An entry that misses the tolerance at h is measured again at
// h/2 and compared with the Richardson extrapolation (4 D(h/2) − D(h)) / 3, whose error is
// O(h⁴): truncation vanishes from it, a wrong gradient does not. Such entries are counted
// in `truncated`. h is never below `step` (the absolute floor for variables at 0).
//
// Sampling: with `sample` > 0, each variable tensor larger than that has `sample` of its
// elements checked, not all: a quarter the largest analytic gradients, up to an eighth
// elements whose value is 0 (biases at initialisation), the rest uniformly at random,
// all chosen from `sample_seed`. A wrong VJP shows in most of a tensor's entries, so a
// sample finds it; a bug confined to a handful of entries can slip through, which is why
// small models are checked whole.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "pens/graph/graph.h"
#include "pens/ops/random.h"

namespace pens {

struct OpDef;
struct CheckCase;

struct GradcheckOptions {
  double step = 1e-5;
  double tolerance = 1e-6;
  double floor = 1e-3;
  int64_t batch = 3;              // bound to kBatch dimensions of inputs
  bool inputs = true;             // real inputs are variables too (else parameters only)
  NoiseKey key{20141208, 17};     // noise frozen at this key
  uint64_t init_seed = 1;         // parameters not given values are initialized with it
  int64_t sample = 0;             // elements checked per variable tensor; 0: all of them
  uint64_t sample_seed = 1;
  // Called after each checked element with (checked, to check); the CLI prints progress.
  std::function<void(int64_t, int64_t)> progress = {};
};

struct GradcheckResult {
  bool passed = true;
  double max_error = 0;
  std::string worst;      // "d out[3] / d W1[12]: analytic 0.25, numeric 0.2501"
  int64_t entries = 0;    // Jacobian entries compared
  int64_t nonzero = 0;    // of those, entries whose analytic value is not 0
  int64_t truncated = 0;  // of those, entries that passed only after extrapolation
  double max_plain_error = 0;  // the largest error of a plain central difference at h
  int64_t variables = 0;  // variable elements
  int64_t checked = 0;    // of those, elements perturbed (all unless sampled)
  int64_t targets = 0;    // target elements
};

// `values` gives parameters and inputs by node name; parameters not listed are
// initialized from their init attributes, real inputs not listed are drawn uniformly
// from [-1, 1]; index inputs must be listed.
GradcheckResult gradcheck(const Graph& g, const std::map<std::string, std::vector<double>>& values,
                          const GradcheckOptions& options = {});

// Labels for a model's index inputs at this batch: row i gets class i mod C, C read off
// the scores the labels are compared with (1 when no consumer says how many there are).
std::map<std::string, std::vector<double>> label_values(const Graph& g, int64_t batch);

// How many elements per tensor a model check samples by default: all (0) up to 10,000
// parameter elements, 64 per tensor above.
int64_t default_sample(const Graph& g, int64_t batch);

// The graph of an op's check case (ops/check_case.h): real inputs "x<i>" as parameters,
// index inputs "i<i>" as constants, the op under test "out" flagged as the output; and the
// values of the parameters (and of "out" itself for a leaf op).
struct CheckGraph {
  Graph graph;
  std::map<std::string, std::vector<double>> values;
};
CheckGraph check_graph(const OpDef& op, const CheckCase& c);

struct OpCheckResult {
  std::string label;  // the case, e.g. "matmul[transpose_a=1,transpose_b=0]"
  GradcheckResult result;
};

// Runs every check case of an op (see ops/check_case.h).
std::vector<OpCheckResult> gradcheck_op(const OpDef& op, const GradcheckOptions& options = {});

}  // namespace pens
