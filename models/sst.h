// The Stanford Sentiment Treebank in its PTB tree format: one binarized, labeled phrase
// tree per line, `(label child child)` or `(label word)`, labels 0..4. The reader checks
// everything (parentheses, labels, arity, words, UTF-8, one tree per line) and names the
// file, line and column of the first fault; it is iterative, so no input can exhaust the
// stack, and it reads each byte a bounded number of times. Treebanks in the same format
// whose trees are not binary (`(label child child child)`, unary nodes) read with a
// larger `max_children`.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "pens/graph/tree.h"

namespace pens {

// One sentence's tree. Nodes are in post-order (children before their parent), so the
// root is the last node. Leaves have no children and a word; internal nodes have
// children (two in the SST) and an empty word.
struct SentimentTree {
  TreeShape shape;
  std::vector<int8_t> label;       // 0..4 as in the file; -1: none (no loss, not scored)
  std::vector<std::string> word;   // leaves only
  std::vector<int32_t> word_id;    // leaves: the vocabulary's id (Vocabulary::ids); -1 elsewhere
  int64_t line = 0;                // where the tree was read

  int64_t size() const { return shape.size(); }
  int64_t root() const { return size() - 1; }
  bool is_leaf(int64_t i) const { return shape.is_leaf(i); }
};

// Several trees as one forest: nodes of tree k follow those of trees 0..k-1 (children
// offset accordingly), so each tree's root is its last node. `offsets[k]` is where tree k
// starts. A forest unrolls into one graph whose levels span every tree (graph/tree.h).
struct Forest {
  SentimentTree nodes;
  std::vector<int64_t> offsets;
  std::vector<int64_t> roots;
};
Forest make_forest(const std::vector<const SentimentTree*>& trees);

// Parses every line of `text` (blank lines are errors: a line that is not one tree).
// `source` names the text in errors: "<source>:<line>:<column>: <what>". Internal nodes
// have exactly 2 children when max_children is 2 (the SST's binarized trees), otherwise
// 1 to max_children.
std::vector<SentimentTree> parse_trees(const std::string& text, const std::string& source, int64_t max_children = 2);
// Reads a file of trees (refuses files over 1 GiB and anything that is not a regular file).
std::vector<SentimentTree> read_trees(const std::string& path, int64_t max_children = 2);

// `word` with its ASCII letters lowercased; bytes of multi-byte UTF-8 characters (all
// >= 0x80) stay as they are.
std::string ascii_lowercase(std::string word);

// How words become vocabulary entries: a word gets its own id when it occurs at least
// `min_count` times in the training trees; with `lowercase`, words that differ only in the
// case of ASCII letters are one word ("The" and "the"; the authors' code lowercases too).
struct VocabularyPolicy {
  int64_t min_count = 1;
  bool lowercase = false;
};

// The words a model knows. Id 0 is "<unk>". Every word the policy leaves without an id (rare
// training words, and words seen only in dev or test) maps to <unk>, so the <unk> vector is
// trained on the rare words that stand in for unseen ones at test time. Without
// `lowercase`, words are matched exactly (case and the treebank's escapes such as -LRB- kept).
class Vocabulary {
 public:
  static constexpr int32_t kUnknown = 0;
  Vocabulary() : words_{"<unk>"} {}
  static Vocabulary from_trees(const std::vector<SentimentTree>& trees, const VocabularyPolicy& policy);
  int32_t id(const std::string& word) const;
  const std::string& word(int32_t id) const { return words_.at(static_cast<size_t>(id)); }
  int64_t size() const { return static_cast<int64_t>(words_.size()); }
  // Sets word_id of every leaf; returns how many leaves mapped to <unk>.
  int64_t assign_ids(std::vector<SentimentTree>& trees) const;

 private:
  std::string key(const std::string& word) const;  // the word as the policy counts it

  std::vector<std::string> words_;
  std::unordered_map<std::string, int32_t> ids_;
  bool lowercase_ = false;
};

// Which labels a node carries for training and evaluation.
enum class SentimentTask {
  Fine,    // 5 classes, every node labeled
  Binary,  // 2 classes: 0,1 -> negative (0), 3,4 -> positive (1); neutral (2) nodes carry no
           // loss and neutral roots are not evaluated
};
SentimentTask parse_sentiment_task(const std::string& name);  // "fine" | "binary"
const char* task_name(SentimentTask task);
int64_t task_classes(SentimentTask task);
// The class of a node with file label `label` for the task; -1: no label (and for -1).
int32_t task_label(SentimentTask task, int label);

// The three splits of a treebank (read by a treebank source: models/treebank_source.h).
struct SentimentTreebank {
  std::vector<SentimentTree> train, dev, test;
};

}  // namespace pens
