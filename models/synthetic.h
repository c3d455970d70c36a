// A synthetic classification task for tests and examples that need no data files:
// inputs x ~ N(0, I), labels from a fixed random "teacher" network,
// y = argmax(tanh(x A) B). Learnable, not linearly separable, and the same for a seed on
// every machine.
#pragma once

#include <cstdint>
#include <vector>

#include "pens/models/dataset.h"

namespace pens {

// `teacher_seed` fixes the task; `seed` the examples drawn from it.
Dataset make_teacher_task(int64_t size, int64_t dim, int64_t classes, uint64_t seed,
                          uint64_t teacher_seed = 7);

}  // namespace pens
