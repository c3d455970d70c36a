// Treebank sources: where a tree run's (and skip-gram's) sentences come from, the three
// splits of labeled trees. A config names its source in its data section ("source": "sst",
// the default), with the folder `dir` and the source's own settings beside it:
//
//   "data": {"source": "bracketed", "dir": "../my-treebank", "max_children": 3,
//            "train": "train.txt", "dev": "dev.txt", "test": "test.txt"}
//
// A new treebank is a source, not a trainer: one function that reads its files into
// SentimentTrees (models/sst.h: post-order nodes with labels 0..4 and leaf words), and one
// registration line (TreebankSourceRegistry::register_global(), docs/adding-a-data-set.md).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "pens/models/sst.h"
#include "pens/ops/ir/attributes.h"
#include "pens/ops/ir/named_table.h"

namespace pens {

struct TreebankSourceKind {
  static constexpr const char* kWhat = "treebank source";
  std::string name;
  std::string summary;  // one line: what it reads
  // Settings of the source, in the config's data section beside dir (checked and given
  // their defaults before load() sees them).
  std::vector<AttrSpec> settings;
  // Reads the train, dev and test trees from `dir`; errors name the file and line.
  std::function<SentimentTreebank(const std::string& dir, const Attributes& settings)> load;
};

// TreebankSourceRegistry::global().at("sst"); register_global(kind) adds one.
using TreebankSourceRegistry = Registry<TreebankSourceKind>;
template <>
std::vector<TreebankSourceKind> builtin_kinds<TreebankSourceKind>();

// The three splits from the registered source `source` (settings checked against its
// schema and given their defaults here).
SentimentTreebank load_treebank(const std::string& source, const std::string& dir, Attributes settings);

// The built-in sources, defined beside their reader (models/sst.cpp).
TreebankSourceKind sst_source();        // the SST's folder: train.txt, dev.txt, test.txt, binary trees
TreebankSourceKind bracketed_source();  // the same format, any arity, files named in the config

}  // namespace pens
