#include "pens/models/dataset.h"

#include <Eigen/Core>
#include <algorithm>

#include "pens/ops/ir/error.h"
#include "pens/ops/random.h"

namespace pens {

void copy_batch(const Dataset& d, int64_t first, TensorView<float> x, TensorView<float> y) {
  const int64_t batch = y.size();
  if (x.size() != batch * d.dim) fail("batch of ", batch, " rows needs x of ", batch * d.dim, " values");
  for (int64_t r = 0; r < batch; ++r) {
    const int64_t i = (first + r) % d.size;
    std::copy_n(d.x.data() + i * d.dim, d.dim, x.data + r * d.dim);
    y[r] = d.y[static_cast<size_t>(i)];
  }
}

void gather_rows(const Dataset& d, std::span<const int64_t> rows, int64_t at, TensorView<float> x,
                 TensorView<float> y) {
  const auto n = static_cast<int64_t>(rows.size());
  if (x.shape.rank >= 2 && x.shape.cols() != d.dim) {
    fail("examples of ", d.dim, " values do not fit an input of ", x.shape.cols(), " per row");
  }
  if ((at + n) * d.dim > x.size()) fail("rows ", at, "..", at + n, " do not fit a batch of ", x.size() / d.dim);
  if (y && at + n > y.size()) fail("rows ", at, "..", at + n, " do not fit ", y.size(), " labels");
  for (int64_t r = 0; r < n; ++r) {
    const int64_t i = rows[static_cast<size_t>(r)];
    std::copy_n(d.x.data() + i * d.dim, d.dim, x.data + (at + r) * d.dim);
    if (y) y[at + r] = d.y[static_cast<size_t>(i)];
  }
}

Dataset make_dataset(int64_t size, int64_t dim, int64_t classes, const std::string& what) {
  if (size < 0 || dim < 0) fail(what, ": a data set of ", size, " examples of ", dim, " values");
  Dataset d;
  const auto elements = static_cast<uint64_t>(size);
  d.memory = MemoryCharge(bytes_of(bytes_of(elements, static_cast<uint64_t>(dim), what) + elements, sizeof(float), what),
                          cat(what, " (", size, " examples of ", dim, " values)"));
  d.size = size;
  d.dim = dim;
  d.classes = classes;
  d.x.resize(static_cast<size_t>(size * dim));
  d.y.resize(static_cast<size_t>(size));
  return d;
}

Dataset subset(const Dataset& d, std::span<const int64_t> rows) {
  Dataset s = make_dataset(static_cast<int64_t>(rows.size()), d.dim, d.classes, "a subset of a data set");
  for (int64_t r = 0; r < s.size; ++r) {
    const int64_t i = rows[static_cast<size_t>(r)];
    if (i < 0 || i >= d.size) fail("example ", i, " is outside a set of ", d.size);
    std::copy_n(d.x.data() + i * d.dim, d.dim, s.x.data() + r * d.dim);
    s.y[static_cast<size_t>(r)] = d.y[static_cast<size_t>(i)];
  }
  return s;
}

std::vector<double> feature_means(const Dataset& d) {
  if (d.size == 0) fail("feature means of an empty data set");
  std::vector<double> mean(static_cast<size_t>(d.dim), 0.0);
  for (int64_t r = 0; r < d.size; ++r) {
    const float* row = d.x.data() + r * d.dim;
    for (int64_t j = 0; j < d.dim; ++j) mean[static_cast<size_t>(j)] += row[j];
  }
  for (double& m : mean) m /= static_cast<double>(d.size);
  return mean;
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

std::vector<int64_t> permutation(int64_t n, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  const NoiseStream draws(NoiseKey{seed, 0}, stream);
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = std::min(i, static_cast<int64_t>(draws.uniform(static_cast<uint64_t>(i)) * static_cast<double>(i + 1)));
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
  }
  return p;
}

int64_t labeled_examples(const Dataset& d) {
  return std::count_if(d.y.begin(), d.y.end(), [](float label) { return label >= 0; });
}

Split semi_supervised_split(const Dataset& train, int64_t labeled, int64_t validation, uint64_t seed) {
  if (train.classes <= 0) fail("the training set has no classes");
  if (labeled <= 0 || labeled % train.classes != 0) {
    fail("labeled examples: ", labeled, " is not a positive multiple of the ", train.classes,
         " classes (the labeled set holds the same number of each class)");
  }
  const int64_t with_labels = labeled_examples(train);
  if (validation < 0 || validation + labeled > with_labels) {
    fail(labeled, " labeled and ", validation, " validation examples do not fit a training set of ", with_labels,
         with_labels < train.size ? " examples with labels" : "");
  }
  // Stream 1 of the split seed shuffles; training draws use other streams.
  const std::vector<int64_t> order = permutation(train.size, seed, 1);
  Split s;
  const int64_t per_class = labeled / train.classes;
  std::vector<int64_t> taken(static_cast<size_t>(train.classes), 0);
  for (const int64_t row : order) {
    const float label = train.y[static_cast<size_t>(row)];
    if (label < 0 || static_cast<int64_t>(s.validation.size()) < validation) {
      (label < 0 ? s.unlabeled : s.validation).push_back(row);
      continue;
    }
    const auto c = static_cast<size_t>(label);
    if (taken[c] < per_class) {
      ++taken[c];
      s.labeled.push_back(row);
    } else {
      s.unlabeled.push_back(row);
    }
  }
  for (size_t c = 0; c < taken.size(); ++c) {
    if (taken[c] < per_class) {
      fail("class ", c, " has only ", taken[c], " examples outside the validation set; ", per_class, " are needed");
    }
  }
  return s;
}

void for_each_batch(const Dataset& d, int64_t batch,
                    const std::function<void(std::span<const int64_t> rows, int64_t first, int64_t n)>& visit) {
  std::vector<int64_t> rows;
  for (int64_t first = 0; first < d.size; first += batch) {
    rows.clear();
    for (int64_t r = 0; r < batch; ++r) rows.push_back(std::min(first + r, d.size - 1));
    visit(rows, first, std::min(batch, d.size - first));
  }
}

void Cycler::take(int64_t first, int64_t n, std::vector<int64_t>& out) {
  out.clear();
  const auto size = static_cast<int64_t>(items_.size());
  for (int64_t k = first; k < first + n; ++k) {
    const int64_t pass = k / size;
    if (pass != pass_) {
      order_ = permutation(size, seed_, stream_ + static_cast<uint64_t>(pass));
      pass_ = pass;
    }
    out.push_back(items_[static_cast<size_t>(order_[static_cast<size_t>(k % size)])]);
  }
}

}  // namespace pens
