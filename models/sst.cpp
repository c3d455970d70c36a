#include "pens/models/sst.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <span>

#include "pens/models/treebank_source.h"
#include "pens/ops/ir/error.h"
#include "pens/serialization/files.h"

namespace pens {

namespace {

constexpr uint64_t kMaxTreeFileBytes = uint64_t{1} << 30;

// The column (1-based) of the first byte of `line` that is not valid UTF-8, or 0.
size_t first_invalid_utf8(std::string_view line) {
  size_t i = 0;
  while (i < line.size()) {
    const auto b = static_cast<unsigned char>(line[i]);
    size_t len = 0;
    uint32_t min = 0;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b & 0xE0) == 0xC0) {
      len = 2, min = 0x80;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, min = 0x800;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, min = 0x10000;
    } else {
      return i + 1;
    }
    if (i + len > line.size()) return i + 1;
    uint32_t code = b & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(line[i + k]);
      if ((c & 0xC0) != 0x80) return i + 1;
      code = (code << 6) | (c & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    if (code < min || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) return i + 1;
    i += len;
  }
  return 0;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Parses one line into a tree, iteratively: a stack of open nodes, each closed node
// appended in post-order.
class LineParser {
 public:
  LineParser(std::string_view line, const std::string& source, int64_t line_no, int64_t max_children)
      : s_(line), source_(source), line_no_(line_no), max_children_(static_cast<size_t>(max_children)) {}

  SentimentTree parse() {
    if (const size_t bad = first_invalid_utf8(s_)) error(bad - 1, "invalid UTF-8");
    skip_spaces();
    if (pos_ == s_.size()) error(pos_, "empty line: expected one tree, '(label ...)'");
    tree_.line = line_no_;
    open_node();
    while (!open_.empty()) {
      skip_spaces();
      if (pos_ == s_.size()) {
        error(pos_, "unbalanced parentheses: ", open_.size(), " '(' not closed at the end of the line");
      }
      const char c = s_[pos_];
      if (c == '(') {
        too_many_children(open_.back(), pos_);
        open_node();
      } else if (c == ')') {
        close_node();
      } else {
        error(pos_, "expected '(' or ')', found '", c, "'");
      }
    }
    skip_spaces();
    if (pos_ != s_.size()) error(pos_, "text after the tree: a line holds exactly one tree");
    return std::move(tree_);
  }

 private:
  struct Open {
    int8_t label = 0;
    size_t column = 0;
    std::vector<int32_t> children;
  };

  template <class... Args>
  [[noreturn]] void error(size_t at, const Args&... what) const {
    fail(source_, ":", line_no_, ":", at + 1, ": ", what...);
  }

  void skip_spaces() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }

  // At '(': reads the label, then either a word (a leaf, closed here) or nothing more
  // (children follow).
  void open_node() {
    if (s_[pos_] != '(') error(pos_, "expected '(' at the start of a tree, found '", s_[pos_], "'");
    const size_t column = pos_++;
    const size_t label_at = pos_;
    while (pos_ < s_.size() && !is_space(s_[pos_]) && s_[pos_] != '(' && s_[pos_] != ')') ++pos_;
    const std::string_view label = s_.substr(label_at, pos_ - label_at);
    if (label.size() != 1 || label[0] < '0' || label[0] > '4') {
      error(label_at, "label must be one of 0..4, got '", label, "'");
    }
    const auto value = static_cast<int8_t>(label[0] - '0');
    skip_spaces();
    if (pos_ == s_.size()) error(pos_, "unbalanced parentheses: the line ends inside a node");
    if (s_[pos_] == '(') {
      open_.push_back({value, column, {}});
      return;
    }
    if (s_[pos_] == ')') error(pos_, "empty word: a leaf needs a word, '(label word)'");
    const size_t word_at = pos_;
    while (pos_ < s_.size() && !is_space(s_[pos_]) && s_[pos_] != '(' && s_[pos_] != ')') ++pos_;
    const std::string word(s_.substr(word_at, pos_ - word_at));
    skip_spaces();
    if (pos_ == s_.size() || s_[pos_] != ')') {
      error(pos_, "expected ')' after the word '", word, "' (a leaf holds one word)");
    }
    ++pos_;
    const int32_t id = append(value, {}, word);
    attach(id, word_at);
  }

  void close_node() {
    if (open_.empty()) error(pos_, "unbalanced parentheses: ')' closes nothing");
    Open node = std::move(open_.back());
    open_.pop_back();
    if (max_children_ == 2 && node.children.size() != 2) {
      error(node.column, "a node with ", node.children.size(), " child", node.children.size() == 1 ? "" : "ren",
            " (internal nodes have exactly 2)");
    }
    ++pos_;
    attach(append(node.label, node.children, {}), node.column);
  }

  void too_many_children(const Open& node, size_t at) const {
    if (node.children.size() < max_children_) return;
    if (max_children_ == 2) error(at, "a node with 3 children (trees are binary)");
    error(at, "a node with more than ", max_children_, " children (data.max_children)");
  }

  int32_t append(int8_t label, std::span<const int32_t> children, std::string word) {
    tree_.label.push_back(label);
    tree_.word.push_back(std::move(word));
    tree_.word_id.push_back(-1);
    return tree_.shape.add(children);
  }

  // Gives a closed node to its parent; a node without a parent is the root.
  void attach(int32_t id, size_t column) {
    if (open_.empty()) return;
    too_many_children(open_.back(), column);
    open_.back().children.push_back(id);
  }

  std::string_view s_;
  const std::string& source_;
  int64_t line_no_;
  size_t max_children_;
  size_t pos_ = 0;
  std::vector<Open> open_;
  SentimentTree tree_;
};

}  // namespace

std::vector<SentimentTree> parse_trees(const std::string& text, const std::string& source, int64_t max_children) {
  if (max_children < 2) fail(source, ": trees need max_children >= 2, got ", max_children);
  std::vector<SentimentTree> trees;
  // A UTF-8 byte-order mark, which some editors write at the start of a text file, is
  // not part of the first tree.
  size_t start = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  int64_t line_no = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++line_no;
    const std::string_view line(text.data() + start, end - start);
    if (line.find('\0') != std::string_view::npos) {
      fail(source, ":", line_no, ":", line.find('\0') + 1, ": a NUL byte (not a text file of trees)");
    }
    trees.push_back(LineParser(line, source, line_no, max_children).parse());
    start = end + 1;
  }
  if (trees.empty()) fail(source, ": no trees (the file is empty)");
  return trees;
}

std::vector<SentimentTree> read_trees(const std::string& path, int64_t max_children) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) fail(path, ": no such file of trees");
  if (!std::filesystem::is_regular_file(status)) fail(path, ": not a regular file");
  return parse_trees(read_file(path, kMaxTreeFileBytes), path, max_children);
}

Vocabulary Vocabulary::from_trees(const std::vector<SentimentTree>& trees, const VocabularyPolicy& policy) {
  if (policy.min_count < 1) fail("vocabulary min_count must be >= 1, got ", policy.min_count);
  Vocabulary v;
  v.lowercase_ = policy.lowercase;
  std::map<std::string, int64_t> counts;  // ordered: ids do not depend on hashing
  for (const SentimentTree& t : trees) {
    for (int64_t i = 0; i < t.size(); ++i) {
      if (t.is_leaf(i)) ++counts[v.key(t.word[static_cast<size_t>(i)])];
    }
  }
  for (const auto& [word, count] : counts) {
    if (count < policy.min_count) continue;
    v.ids_.emplace(word, static_cast<int32_t>(v.words_.size()));
    v.words_.push_back(word);
  }
  return v;
}

std::string ascii_lowercase(std::string word) {
  for (char& c : word) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return word;
}

std::string Vocabulary::key(const std::string& word) const { return lowercase_ ? ascii_lowercase(word) : word; }

int32_t Vocabulary::id(const std::string& word) const {
  const auto it = ids_.find(key(word));
  return it == ids_.end() ? kUnknown : it->second;
}

int64_t Vocabulary::assign_ids(std::vector<SentimentTree>& trees) const {
  int64_t unknown = 0;
  for (SentimentTree& t : trees) {
    for (int64_t i = 0; i < t.size(); ++i) {
      const auto k = static_cast<size_t>(i);
      t.word_id[k] = t.is_leaf(i) ? id(t.word[k]) : -1;
      unknown += t.is_leaf(i) && t.word_id[k] == kUnknown;
    }
  }
  return unknown;
}

Forest make_forest(const std::vector<const SentimentTree*>& trees) {
  Forest f;
  SentimentTree& all = f.nodes;
  std::vector<int32_t> shifted;
  for (const SentimentTree* t : trees) {
    const auto offset = static_cast<int32_t>(all.size());
    f.offsets.push_back(offset);
    for (int64_t i = 0; i < t->size(); ++i) {
      const auto k = static_cast<size_t>(i);
      shifted.clear();
      for (int32_t c : t->shape.children(i)) shifted.push_back(c + offset);
      all.shape.add(shifted);
      all.label.push_back(t->label[k]);
      all.word.push_back(t->word[k]);
      all.word_id.push_back(t->word_id[k]);
    }
    f.roots.push_back(all.size() - 1);
  }
  return f;
}

SentimentTask parse_sentiment_task(const std::string& name) {
  if (name == "fine") return SentimentTask::Fine;
  if (name == "binary") return SentimentTask::Binary;
  fail("unknown sentiment task '", name, "' (fine | binary)");
}

const char* task_name(SentimentTask task) { return task == SentimentTask::Fine ? "fine" : "binary"; }

int64_t task_classes(SentimentTask task) { return task == SentimentTask::Fine ? 5 : 2; }

int32_t task_label(SentimentTask task, int label) {
  if (label < 0) return -1;
  if (task == SentimentTask::Fine) return label;
  if (label == 2) return -1;
  return label > 2 ? 1 : 0;
}

namespace {

SentimentTreebank read_splits(const std::string& dir, const std::string& train, const std::string& dev,
                              const std::string& test, int64_t max_children) {
  if (!std::filesystem::is_directory(dir)) {
    fail(dir, ": no such folder of treebank files (", train, ", ", dev, ", ", test, "; see scripts/check-sst.sh)");
  }
  const std::filesystem::path d(dir);
  return {read_trees((d / train).string(), max_children), read_trees((d / dev).string(), max_children),
          read_trees((d / test).string(), max_children)};
}

AttrSpec file_setting(const char* split) {
  return {.name = split, .type = AttrType::String, .default_value = AttrValue(cat(split, ".txt")),
          .doc = cat("the file of ", split, " trees in dir")};
}

}  // namespace

TreebankSourceKind sst_source() {
  return {.name = "sst",
          .summary = "the Stanford Sentiment Treebank's folder: train.txt, dev.txt, test.txt of binary trees",
          .settings = {},
          .load = [](const std::string& dir, const Attributes&) {
            return read_splits(dir, "train.txt", "dev.txt", "test.txt", 2);
          }};
}

TreebankSourceKind bracketed_source() {
  return {.name = "bracketed",
          .summary = "trees in the SST's bracketed format, labels 0..4, nodes of 1 to max_children children",
          .settings = {file_setting("train"), file_setting("dev"), file_setting("test"),
                       {.name = "max_children", .type = AttrType::Int, .default_value = AttrValue(int64_t{2}),
                        .doc = "the most children a node may have (2: binary trees, every internal node with 2)",
                        .range = AttrRange::at_least(2)}},
          .load = [](const std::string& dir, const Attributes& s) {
            return read_splits(dir, s.get_string("train"), s.get_string("dev"), s.get_string("test"),
                               s.get_int("max_children"));
          }};
}

}  // namespace pens
