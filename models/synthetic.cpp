#include "models/synthetic.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "graph/error.h"
#include "ops/random.h"

namespace pens {

Dataset make_teacher_task(int64_t size, int64_t dim, int64_t classes, uint64_t seed,
                          uint64_t teacher_seed) {
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int64_t hidden = 2 * dim;
  Matrix a(dim, hidden), b(hidden, classes);
  NoiseStream(NoiseKey{teacher_seed, 0}, 1).normal(a.data(), a.size(), 1.0f / std::sqrt(float(dim)));
  NoiseStream(NoiseKey{teacher_seed, 0}, 2).normal(b.data(), b.size(), 1.0f / std::sqrt(float(hidden)));

  Dataset d;
  d.size = size;
  d.dim = dim;
  d.classes = classes;
  d.x.resize(static_cast<size_t>(size * dim));
  d.y.resize(static_cast<size_t>(size));
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

void copy_batch(const Dataset& d, int64_t first, TensorView<float> x, TensorView<float> y) {
  const int64_t batch = y.size();
  if (x.size() != batch * d.dim) fail("batch of ", batch, " rows needs x of ", batch * d.dim, " values");
  for (int64_t r = 0; r < batch; ++r) {
    const int64_t i = (first + r) % d.size;
    std::copy_n(d.x.data() + i * d.dim, d.dim, x.data + r * d.dim);
    y[r] = d.y[static_cast<size_t>(i)];
  }
}

double error_rate(const Dataset& d, TensorView<const float> scores) {
  if (scores.shape.rows() != d.size || scores.shape.cols() != d.classes) {
    fail("scores of shape ", scores.shape.str(), " do not fit ", d.size, " examples of ",
         d.classes, " classes");
  }
  auto s = scores.mat();
  int64_t wrong = 0;
  for (int64_t i = 0; i < d.size; ++i) {
    Eigen::Index best;
    s.row(i).maxCoeff(&best);
    wrong += static_cast<float>(best) != d.y[static_cast<size_t>(i)];
  }
  return static_cast<double>(wrong) / static_cast<double>(d.size);
}

}  // namespace pens
