#include "pens/models/sst.h"

#include <algorithm>
#include <filesystem>
#include <map>

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
  LineParser(std::string_view line, const std::string& source, int64_t line_no)
      : s_(line), source_(source), line_no_(line_no) {}

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
        if (open_.back().children.size() == 2) error(pos_, "a node with 3 children (trees are binary)");
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
    const int32_t id = append(value, -1, -1, word);
    attach(id, word_at);
  }

  void close_node() {
    if (open_.empty()) error(pos_, "unbalanced parentheses: ')' closes nothing");
    Open node = std::move(open_.back());
    open_.pop_back();
    if (node.children.size() != 2) {
      error(node.column, "a node with ", node.children.size(), " child", node.children.size() == 1 ? "" : "ren",
            " (internal nodes have exactly 2)");
    }
    ++pos_;
    attach(append(node.label, node.children[0], node.children[1], {}), node.column);
  }

  int32_t append(int8_t label, int32_t left, int32_t right, std::string word) {
    tree_.left.push_back(left);
    tree_.right.push_back(right);
    tree_.label.push_back(label);
    tree_.word.push_back(std::move(word));
    tree_.word_id.push_back(-1);
    return static_cast<int32_t>(tree_.left.size() - 1);
  }

  // Gives a closed node to its parent; a node without a parent is the root.
  void attach(int32_t id, size_t column) {
    if (open_.empty()) return;
    if (open_.back().children.size() == 2) error(column, "a node with 3 children (trees are binary)");
    open_.back().children.push_back(id);
  }

  std::string_view s_;
  const std::string& source_;
  int64_t line_no_;
  size_t pos_ = 0;
  std::vector<Open> open_;
  SentimentTree tree_;
};

}  // namespace

std::vector<SentimentTree> parse_trees(const std::string& text, const std::string& source) {
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
    trees.push_back(LineParser(line, source, line_no).parse());
    start = end + 1;
  }
  if (trees.empty()) fail(source, ": no trees (the file is empty)");
  return trees;
}

std::vector<SentimentTree> read_trees(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) fail(path, ": no such file of trees");
  if (!std::filesystem::is_regular_file(status)) fail(path, ": not a regular file");
  return parse_trees(read_file(path, kMaxTreeFileBytes), path);
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

std::string Vocabulary::key(const std::string& word) const {
  if (!lowercase_) return word;
  std::string folded = word;
  // ASCII letters only: bytes of multi-byte UTF-8 characters are all >= 0x80 and stay as they are.
  for (char& c : folded) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return folded;
}

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
  for (const SentimentTree* t : trees) {
    const auto offset = static_cast<int32_t>(all.size());
    f.offsets.push_back(offset);
    for (int64_t i = 0; i < t->size(); ++i) {
      const auto k = static_cast<size_t>(i);
      all.left.push_back(t->left[k] < 0 ? -1 : t->left[k] + offset);
      all.right.push_back(t->right[k] < 0 ? -1 : t->right[k] + offset);
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
  if (task == SentimentTask::Fine) return label;
  if (label == 2) return -1;
  return label > 2 ? 1 : 0;
}

SentimentTreebank load_sst(const std::string& dir) {
  if (!std::filesystem::is_directory(dir)) {
    fail(dir, ": no such folder of treebank files (train.txt, dev.txt, test.txt; see scripts/check-sst.sh)");
  }
  const std::filesystem::path d(dir);
  return {read_trees((d / "train.txt").string()), read_trees((d / "dev.txt").string()),
          read_trees((d / "test.txt").string())};
}

}  // namespace pens
