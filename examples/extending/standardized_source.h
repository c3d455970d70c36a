// A data source defined outside pens: NumPy arrays whose features are standardized, each
// to mean 0 and standard deviation 1 over the training examples (the test examples with
// the training set's statistics), for data whose features come in unrelated units.
// Register it once at start-up:
//   pens::DataSourceRegistry::register_global(standardized_source());
// and a config reads it with "data": {"source": "standardized", "dir": ..., "x": ..., "y": ...}.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "pens/models/data_source.h"
#include "pens/ops/ir/error.h"
#include "pens/serialization/npy.h"

// The examples of a features array (n × d) and a labels array (n) of classes from 0.
inline pens::Dataset npy_examples(const std::string& x_path, const std::string& y_path) {
  const pens::NpyArray x = pens::read_npy(x_path);
  const pens::NpyArray y = pens::read_npy(y_path);
  if (x.shape.size() != 2) pens::fail(x_path, ": expected an (examples × features) array");
  if (y.shape.size() != 1 || y.shape[0] != x.shape[0] || !y.integral) {
    pens::fail(y_path, ": expected one whole-number label per example of ", x_path);
  }
  pens::Dataset d = pens::make_dataset(x.shape[0], x.shape[1], 0, x_path);
  d.x = x.data;
  d.y = y.data;
  for (const float label : d.y) d.classes = std::max<int64_t>(d.classes, static_cast<int64_t>(label) + 1);
  return d;
}

inline pens::DataSourceKind standardized_source() {
  return {
      .name = "standardized",
      .summary = "NumPy arrays x, y (and test_x, test_y), features standardized by the training set",
      .settings = {{.name = "x", .type = pens::AttrType::String, .default_value = pens::AttrValue(std::string("x.npy")),
                    .doc = "the training features"},
                   {.name = "y", .type = pens::AttrType::String, .default_value = pens::AttrValue(std::string("y.npy")),
                    .doc = "the training labels"},
                   {.name = "test_x", .type = pens::AttrType::String, .default_value = pens::AttrValue(std::string()),
                    .doc = "the test features (\"\": no test set)"},
                   {.name = "test_y", .type = pens::AttrType::String, .default_value = pens::AttrValue(std::string()),
                    .doc = "the test labels"}},
      .load = [](const std::string& dir, const pens::Attributes& settings, const std::string& part) {
        const auto file = [&](const char* key) { return (std::filesystem::path(dir) / settings.get_string(key)).string(); };
        if (part == "test" && settings.get_string("test_x").empty()) return pens::Dataset{};
        const pens::Dataset train = npy_examples(file("x"), file("y"));
        pens::Dataset d = part == "train" ? train : npy_examples(file("test_x"), file("test_y"));
        if (d.dim != train.dim) pens::fail(file("test_x"), ": ", d.dim, " features, the training set has ", train.dim);
        // Each feature's mean and standard deviation over the training examples.
        for (int64_t f = 0; f < train.dim; ++f) {
          double sum = 0, squares = 0;
          for (int64_t i = 0; i < train.size; ++i) sum += train.x[static_cast<size_t>(i * train.dim + f)];
          const double mean = sum / static_cast<double>(train.size);
          for (int64_t i = 0; i < train.size; ++i) {
            squares += std::pow(train.x[static_cast<size_t>(i * train.dim + f)] - mean, 2);
          }
          const double sd = std::sqrt(squares / static_cast<double>(train.size));
          const double scale = sd > 0 ? 1 / sd : 1;  // a constant feature stays 0
          for (int64_t i = 0; i < d.size; ++i) {
            float& v = d.x[static_cast<size_t>(i * d.dim + f)];
            v = static_cast<float>((v - mean) * scale);
          }
        }
        return d;
      }};
}
