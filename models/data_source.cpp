#include "pens/models/data_source.h"

#include <algorithm>

#include "pens/ops/ir/error.h"

namespace pens {

template <>
std::vector<DataSourceKind> builtin_kinds<DataSourceKind>() {
  return {mnist_source(), npy_source(), csv_source()};
}

TrainData load_data(const std::string& source, const std::string& dir, const Attributes& settings) {
  const DataSourceKind& kind = DataSourceRegistry::global().at(source);
  TrainData data{kind.load(dir, settings, "train"), kind.load(dir, settings, "test")};
  if (data.test.size > 0 && data.test.dim != data.train.dim) {
    fail(dir, ": the test examples have ", data.test.dim, " features, the training examples ", data.train.dim);
  }
  data.test.dim = data.train.dim;
  data.train.classes = data.test.classes = std::max(data.train.classes, data.test.classes);
  return data;
}

}  // namespace pens
