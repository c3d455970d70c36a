#include "pens/models/synthetic.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "pens/ops/ir/error.h"
#include "pens/ops/random.h"

namespace pens {

Dataset make_teacher_task(int64_t size, int64_t dim, int64_t classes, uint64_t seed,
                          uint64_t teacher_seed) {
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int64_t hidden = 2 * dim;
  Matrix a(dim, hidden), b(hidden, classes);
  NoiseStream(NoiseKey{teacher_seed, 0}, 1).normal(a.data(), a.size(), 1.0f / std::sqrt(float(dim)));
  NoiseStream(NoiseKey{teacher_seed, 0}, 2).normal(b.data(), b.size(), 1.0f / std::sqrt(float(hidden)));

  Dataset d = make_dataset(size, dim, classes, "the synthetic data set");
  NoiseStream(NoiseKey{seed, 0}, 3).normal(d.x.data(), size * dim, 1.0f);
  Eigen::Map<const Matrix> x(d.x.data(), size, dim);
  const Matrix scores = (x * a).array().tanh().matrix() * b;
  for (int64_t i = 0; i < size; ++i) {
    Eigen::Index best;
    scores.row(i).maxCoeff(&best);
    d.y[static_cast<size_t>(i)] = static_cast<float>(best);
  }
  return d;
}

}  // namespace pens
