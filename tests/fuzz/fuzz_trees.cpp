// libFuzzer target for the sentiment tree reader (PTB format, one tree per line): any bytes
// must either parse or be refused with a pens::Error. What parses must be well formed
// (post-order children, labels 0..4, words on leaves only), and must go through the
// vocabulary and the forest builder that training uses.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pens/models/sst.h"
#include "pens/ops/ir/error.h"

namespace {

void check_tree(const pens::SentimentTree& t) {
  for (int64_t i = 0; i < t.size(); ++i) {
    const auto k = static_cast<size_t>(i);
    if (t.label[k] < 0 || t.label[k] > 4) __builtin_trap();
    const std::span<const int32_t> children = t.shape.children(i);
    if (t.is_leaf(i)) {
      if (t.word[k].empty()) __builtin_trap();
    } else if (children.size() != 2 || !t.word[k].empty()) {
      __builtin_trap();
    }
    for (int32_t c : children) {
      if (c < 0 || c >= i) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    std::vector<pens::SentimentTree> trees = pens::parse_trees(text, "fuzz.txt");
    std::vector<const pens::SentimentTree*> all;
    for (const pens::SentimentTree& t : trees) {
      check_tree(t);
      all.push_back(&t);
    }
    const pens::Vocabulary vocabulary = pens::Vocabulary::from_trees(trees, {});
    if (vocabulary.assign_ids(trees) != 0) __builtin_trap();  // every word was counted once
    if (!all.empty()) check_tree(pens::make_forest(all).nodes);
  } catch (const pens::Error&) {
    // Refused with a message: the expected outcome for bad input.
  }
  return 0;
}
