// Data sources: where a dense (one row of features per example) run's training and test
// sets come from. A config names its source in its data section ("source": "mnist", the
// default, or "npy"), with the folder `dir` and the source's own settings beside it:
//
//   "data": {"source": "npy", "dir": "../my-data", "x": "features.npy", "y": "labels.npy",
//            "labeled": 100, "validation": 1000}
//
// Sources are an open registry, like ops, noise kinds and optimizers: a program adds its
// own with DataSourceRegistry::register_global() (docs/adding-a-data-set.md).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "pens/models/dataset.h"
#include "pens/ops/ir/attributes.h"
#include "pens/ops/ir/named_table.h"

namespace pens {

// A run's examples: the training set (split into labeled, unlabeled and validation rows
// by the config) and the test set (size 0 when the source has none: test errors are then
// not reported).
struct TrainData {
  Dataset train;
  Dataset test;
};

struct DataSourceKind {
  static constexpr const char* kWhat = "data source";
  std::string name;
  std::string summary;  // one line: what it reads
  // Settings of the source, in the config's data section beside dir (checked and given
  // their defaults before load() sees them).
  std::vector<AttrSpec> settings;
  // Reads the examples of `part` ("train" or "test") from `dir`; errors name the files. A
  // source without a test set returns an empty one (size 0).
  std::function<Dataset(const std::string& dir, const Attributes& settings, const std::string& part)> load;
};

// DataSourceRegistry::global().at("mnist"); DataSourceRegistry::register_global(kind) adds one.
using DataSourceRegistry = Registry<DataSourceKind>;
template <>
std::vector<DataSourceKind> builtin_kinds<DataSourceKind>();

// Both parts from the registered source `source`, with one class count (the larger).
TrainData load_data(const std::string& source, const std::string& dir, const Attributes& settings);

// The built-in sources, each defined beside its reader.
DataSourceKind mnist_source();  // models/mnist.cpp
DataSourceKind npy_source();    // models/npy_source.cpp
DataSourceKind csv_source();    // models/csv_source.cpp

}  // namespace pens
