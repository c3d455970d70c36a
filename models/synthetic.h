// A synthetic classification task for tests, examples and the demo before real data:
// inputs x ~ N(0, I), labels from a fixed random "teacher" network,
// y = argmax(tanh(x A) B). Learnable, not linearly separable, and the same for a seed on
// every machine.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/tensor.h"

namespace pens {

struct Dataset {
  int64_t size = 0;
  int64_t dim = 0;
  int64_t classes = 0;
  std::vector<float> x;  // size × dim, row-major
  std::vector<float> y;  // size labels, as exact integers
};

// `teacher_seed` fixes the task; `seed` the examples drawn from it.
Dataset make_teacher_task(int64_t size, int64_t dim, int64_t classes, uint64_t seed,
                          uint64_t teacher_seed = 7);

// Copies examples first, first + 1, ... (wrapping around the end) into a batch of
// inputs x [B, dim] and labels y [B].
void copy_batch(const Dataset& d, int64_t first, TensorView<float> x, TensorView<float> y);

// Fraction of examples whose largest score is not their label; scores [size, classes].
double error_rate(const Dataset& d, TensorView<const float> scores);

}  // namespace pens
