// Treebanks of random sentiment trees, for tests of tree runs: PTB-style lines whose labels
// follow the words' polarity, so that a model can learn them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "pens/models/sst.h"
#include "pens/ops/ir/error.h"

namespace pens::testing {

// A random tree over 2..7 words, internal nodes of 2 to max_children children (binary by
// default); a node's label is the sign of the sum of its words' polarities (good/great +1,
// bad/awful -1, others 0), as 1, 2 or 3.
inline std::string random_tree(std::mt19937_64& rng, int max_children = 2) {
  static const std::vector<std::pair<std::string, int>> words = {
      {"good", 1}, {"great", 1}, {"bad", -1}, {"awful", -1}, {"the", 0}, {"film", 0}, {"plot", 0}, {"was", 0}};
  struct Part {
    std::string text;
    int polarity;
  };
  std::vector<Part> parts;
  const int n = 2 + static_cast<int>(rng() % 6);
  const auto label = [](int p) { return p > 0 ? 3 : p < 0 ? 1 : 2; };
  for (int i = 0; i < n; ++i) {
    const auto& [w, p] = words[rng() % words.size()];
    parts.push_back({"(" + std::to_string(label(p)) + " " + w + ")", p});
  }
  while (parts.size() > 1) {  // join k neighbours at random
    const size_t most = std::min(parts.size(), static_cast<size_t>(max_children));
    const size_t k = most == 2 ? 2 : 2 + rng() % (most - 1);
    const size_t i = rng() % (parts.size() - k + 1);
    int p = 0;
    std::string children;
    for (size_t j = i; j < i + k; ++j) p += parts[j].polarity, children += " " + parts[j].text;
    parts[i] = {"(" + std::to_string(label(p)) + children + ")", p};
    parts.erase(parts.begin() + static_cast<long>(i) + 1, parts.begin() + static_cast<long>(i + k));
  }
  return parts[0].text;
}

// Writes train.txt, dev.txt and test.txt of that many random trees into `dir`.
inline void write_treebank(const std::string& dir, int train, int dev, int test, uint64_t seed, int max_children = 2) {
  std::mt19937_64 rng(seed);
  for (const auto& [part, count] : std::vector<std::pair<const char*, int>>{{"train.txt", train}, {"dev.txt", dev}, {"test.txt", test}}) {
    std::ofstream out(dir + "/" + part);
    for (int i = 0; i < count; ++i) out << random_tree(rng, max_children) << "\n";
  }
}

// Random binary trees of 1 .. max_words words "w0" .. "w<vocabulary - 1>" and random
// classes, each leaf's word id its number: trees for a model of that vocabulary, without
// a Vocabulary.
inline std::vector<SentimentTree> random_id_trees(int count, int64_t vocabulary, uint64_t seed, int max_words = 6) {
  std::mt19937_64 rng(seed);
  std::vector<SentimentTree> out;
  for (int t = 0; t < count; ++t) {
    std::vector<std::string> parts;
    const int words = 1 + static_cast<int>(rng() % static_cast<uint64_t>(max_words));
    for (int i = 0; i < words; ++i) parts.push_back(cat("(", rng() % 5, " w", rng() % vocabulary, ")"));
    while (parts.size() > 1) {
      const size_t i = rng() % (parts.size() - 1);
      parts[i] = cat("(", rng() % 5, " ", parts[i], " ", parts[i + 1], ")");
      parts.erase(parts.begin() + static_cast<long>(i) + 1);
    }
    SentimentTree tree = parse_trees(parts[0], "test")[0];
    for (int64_t i = 0; i < tree.size(); ++i) {
      const auto k = static_cast<size_t>(i);
      tree.word_id[k] = tree.is_leaf(i) ? std::stoi(tree.word[k].substr(1)) : -1;
    }
    out.push_back(std::move(tree));
  }
  return out;
}

}  // namespace pens::testing
