// What a grouped tree step (TreeStepGraphs) is checked against: the objective and
// parameter gradients of its trees run one by one, and the check itself.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "pens/autodiff/param_store.h"
#include "pens/train/loop/step.h"
#include "pens/train/tasks/tree_model.h"

namespace pens::testing {

// The objective and parameter gradients a step's groups must sum to.
struct StepReference {
  double objective = 0;
  std::vector<float> grads;
};

// Runs step `s` of the assigned trees at a learning rate of 0 (the parameters stay, so
// each step's gradient can be compared) and checks objective and gradients against
// `expected`, which must have some gradient.
inline void check_tree_step(TreeStepGraphs& graphs, Step& step, int64_t s, const ParamStore<float>& params,
                            const StepReference& expected) {
  const StepResult r = graphs.run(step, {.step = s, .learning_rate = 0.0, .momentum = 0});
  REQUIRE(r.finite);
  CHECK(r.objective == doctest::Approx(expected.objective).epsilon(1e-5));
  const std::span<const float> got = params.grads();
  float largest = 0;
  for (float g : expected.grads) largest = std::max(largest, std::abs(g));
  REQUIRE(largest > 0);
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, double{std::abs(got[i] - expected.grads[i])});
  CHECK(worst <= 1e-5 * largest);
}

}  // namespace pens::testing
