// The "npy" data source: features and labels as NumPy arrays (numpy.save), a training pair
// and optionally a test pair, in the config's data folder.
#include <cmath>
#include <filesystem>

#include "pens/models/data_source.h"
#include "pens/ops/ir/error.h"
#include "pens/serialization/npy.h"

namespace pens {

namespace {

// Examples from a features array (n rows; any further axes are flattened into the row, so
// (n, 28, 28) images give 784 features) and a labels array (n, or n × 1) of integers: a
// class from 0, or -1 for an example given without one.
Dataset examples_from(const std::string& x_path, const std::string& y_path) {
  for (const std::string& p : {x_path, y_path}) {
    if (!std::filesystem::is_regular_file(p)) fail(p, ": no such file (the data section names it)");
  }
  NpyArray x = read_npy(x_path);
  const NpyArray y = read_npy(y_path);
  if (x.shape.size() < 2) fail(x_path, ": features must have a row per example (2 or more axes), the array has ", x.shape.size());
  const bool column = y.shape.size() == 2 && y.shape[1] == 1;
  if (y.shape.size() != 1 && !column) fail(y_path, ": labels must be one per example (shape (n,) or (n, 1))");
  if (y.shape[0] != x.shape[0]) fail(y_path, " holds ", y.shape[0], " labels but ", x_path, " holds ", x.shape[0], " examples");
  if (!y.integral) fail(y_path, ": labels must be whole numbers (a class from 0, or -1: no label)");
  int64_t dim = 1;
  for (size_t k = 1; k < x.shape.size(); ++k) dim *= x.shape[k];
  float largest = -1;
  for (size_t i = 0; i < y.data.size(); ++i) {
    if (y.data[i] < -1) fail(y_path, ": label ", y.data[i], " of example ", i, " is below -1 (-1: no label)");
    largest = std::max(largest, y.data[i]);
  }
  for (size_t i = 0; i < x.data.size(); ++i) {
    if (!std::isfinite(x.data[i])) {
      fail(x_path, ": feature ", static_cast<int64_t>(i) % dim, " of example ", static_cast<int64_t>(i) / dim, " is ",
           x.data[i]);
    }
  }
  Dataset d;
  d.size = x.shape[0];
  d.dim = dim;
  d.classes = static_cast<int64_t>(largest) + 1;
  d.x = std::move(x.data);
  d.y = y.data;
  d.memory = std::move(x.memory);
  return d;
}

}  // namespace

DataSourceKind npy_source() {
  return {.name = "npy",
          .summary = "NumPy arrays (numpy.save): features x and labels y, and optionally test_x and test_y",
          .settings = {{.name = "x", .type = AttrType::String, .default_value = AttrValue(std::string("x.npy")),
                        .doc = "the training features, in the data folder"},
                       {.name = "y", .type = AttrType::String, .default_value = AttrValue(std::string("y.npy")),
                        .doc = "the training labels"},
                       {.name = "test_x", .type = AttrType::String, .default_value = AttrValue(std::string()),
                        .doc = "the test features (\"\": no test set)"},
                       {.name = "test_y", .type = AttrType::String, .default_value = AttrValue(std::string()),
                        .doc = "the test labels"}},
          .load = [](const std::string& dir, const Attributes& s, const std::string& part) {
            const std::string& x = s.get_string(part == "train" ? "x" : "test_x");
            const std::string& y = s.get_string(part == "train" ? "y" : "test_y");
            if (x.empty() != y.empty()) fail(dir, ": data.test_x and data.test_y come together (both, or neither)");
            if (x.empty()) return Dataset{};
            const auto in_dir = [&](const std::string& name) { return (std::filesystem::path(dir) / name).string(); };
            return examples_from(in_dir(x), in_dir(y));
          }};
}

}  // namespace pens
