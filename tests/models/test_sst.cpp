// The treebank reader: every kind of bad line is refused with file, line and column; trees
// of any arity when asked for; the treebank sources; the vocabulary and the two tasks' labels.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "pens/models/sst.h"
#include "pens/models/treebank_source.h"
#include "pens/ops/ir/error.h"
#include "tests/support/helpers.h"
#include "tests/support/temp_dir.h"

namespace test_sst {

using namespace pens;

namespace {

std::string error_of(const std::string& text) {
  try {
    parse_trees(text, "t.txt");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("trees are read in post-order with labels and words") {
  const std::vector<SentimentTree> trees = parse_trees("(3 (2 It) (4 (4 works) (2 .)))\n(1 bad)\n", "t.txt");
  REQUIRE(trees.size() == 2);
  const SentimentTree& t = trees[0];
  REQUIRE(t.size() == 5);
  CHECK(t.word == std::vector<std::string>{"It", "works", ".", "", ""});
  TreeShape shape;
  for (int i = 0; i < 3; ++i) shape.add({});
  shape.add({1, 2});
  shape.add({0, 3});
  CHECK(t.shape == shape);
  CHECK(t.label == std::vector<int8_t>{2, 4, 2, 4, 3});
  CHECK(t.line == 1);
  CHECK(trees[1].size() == 1);
  CHECK(trees[1].is_leaf(trees[1].root()));
}

TEST_CASE("a UTF-8 byte-order mark before the first tree is skipped, anywhere else it is an error") {
  const std::vector<SentimentTree> trees = parse_trees("\xEF\xBB\xBF(3 (2 a) (4 b))\n(1 c)\n", "t.txt");
  REQUIRE(trees.size() == 2);
  CHECK(trees[0].word == std::vector<std::string>{"a", "b", ""});
  CHECK(error_of("(2 a)\n\xEF\xBB\xBF(1 c)\n").rfind("t.txt:2:1: expected '(' at the start of a tree", 0) == 0);
}

TEST_CASE("every kind of bad line is an error naming file, line and column") {
  CHECK(error_of("(3 (2 a) (2 b)\n") == "t.txt:1:15: unbalanced parentheses: 1 '(' not closed at the end of the line");
  CHECK(error_of("(3 (2 a) (2 b)))\n") == "t.txt:1:16: text after the tree: a line holds exactly one tree");
  CHECK(error_of("(2 a)\n(7 b)\n") == "t.txt:2:2: label must be one of 0..4, got '7'");
  CHECK(error_of("(-1 b)") == "t.txt:1:2: label must be one of 0..4, got '-1'");
  CHECK(error_of("(3 (2 a) (2 b) (2 c))") == "t.txt:1:16: a node with 3 children (trees are binary)");
  CHECK(error_of("(3 (2 a))") == "t.txt:1:1: a node with 1 child (internal nodes have exactly 2)");
  CHECK(error_of("(2 )") == "t.txt:1:4: empty word: a leaf needs a word, '(label word)'");
  CHECK(error_of("(2 a b)") == "t.txt:1:6: expected ')' after the word 'a' (a leaf holds one word)");
  CHECK(error_of("(2 a)\n\n") == "t.txt:2:1: empty line: expected one tree, '(label ...)'");
  CHECK(error_of("(2 a) (2 b)") == "t.txt:1:7: text after the tree: a line holds exactly one tree");
  CHECK(error_of("(2 caf\xC3(") == "t.txt:1:7: invalid UTF-8");
  CHECK(error_of("(2 \xED\xA0\x80)") == "t.txt:1:4: invalid UTF-8");  // a surrogate
  CHECK(error_of(std::string("(2 a\0)", 6)) == "t.txt:1:5: a NUL byte (not a text file of trees)");
  CHECK(error_of("x") == "t.txt:1:1: expected '(' at the start of a tree, found 'x'");
  CHECK(error_of("") == "t.txt: no trees (the file is empty)");
  CHECK(error_of("(2") == "t.txt:1:3: unbalanced parentheses: the line ends inside a node");
  // UTF-8 words are fine.
  CHECK(parse_trees("(2 caf\xC3\xA9)", "t.txt")[0].word[0] == "caf\xC3\xA9");
}

TEST_CASE("no input crashes or hangs the reader: deep nesting and every prefix of a line") {
  // 200,000 nested nodes: an iterative parser, so no stack to exhaust.
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "(2 ";
  deep += "(2 a)";
  for (int i = 0; i < 100000; ++i) deep += " (2 b))";
  CHECK(parse_trees(deep, "deep")[0].size() == 200001);
  const std::string line = "(3 (2 It) (4 (4 works) (2 .)))";
  for (size_t n = 0; n < line.size(); ++n) CHECK_THROWS_AS(parse_trees(line.substr(0, n) + "\n(2 x)", "p"), Error);
}

TEST_CASE("the vocabulary maps rare and unseen words to <unk>") {
  std::vector<SentimentTree> train = parse_trees("(3 (2 good) (2 film))\n(1 (2 bad) (2 film))\n", "train");
  const Vocabulary all = Vocabulary::from_trees(train, {});
  CHECK(all.size() == 4);  // <unk>, bad, film, good
  CHECK(all.word(0) == "<unk>");
  CHECK(all.id("film") != Vocabulary::kUnknown);
  CHECK(all.id("Film") == Vocabulary::kUnknown);  // exact match, case kept
  const Vocabulary frequent = Vocabulary::from_trees(train, {.min_count = 2});
  CHECK(frequent.size() == 2);
  CHECK(frequent.id("good") == Vocabulary::kUnknown);
  CHECK(frequent.assign_ids(train) == 2);
  CHECK(train[0].word_id == std::vector<int32_t>{0, 1, -1});
  CHECK_THROWS_AS(Vocabulary::from_trees(train, {.min_count = 0}), Error);
}

TEST_CASE("a lowercased vocabulary counts words that differ only in case as one") {
  const std::vector<SentimentTree> train =
      parse_trees("(3 (2 Good) (2 film))\n(3 (2 good) (2 FILM))\n(2 (2 Émile) (2 -LRB-))\n", "train");
  const Vocabulary exact = Vocabulary::from_trees(train, {});
  CHECK(exact.size() == 7);
  const Vocabulary folded = Vocabulary::from_trees(train, {.min_count = 2, .lowercase = true});
  CHECK(folded.size() == 3);  // <unk>, film, good: each seen twice once folded
  CHECK(folded.id("GOOD") == folded.id("good"));
  CHECK(folded.id("Film") != Vocabulary::kUnknown);
  CHECK(folded.word(folded.id("Film")) == "film");
  // Only ASCII letters fold: the UTF-8 bytes of "É" stay, so "émile" is another word.
  const Vocabulary once = Vocabulary::from_trees(train, {.lowercase = true});
  CHECK(once.id("Émile") != Vocabulary::kUnknown);
  CHECK(once.id("émile") == Vocabulary::kUnknown);
  CHECK(once.id("-lrb-") == once.id("-LRB-"));
}

TEST_CASE("with max_children above 2, nodes may have 1 to max_children children") {
  const std::vector<SentimentTree> trees = parse_trees("(3 (2 a) (2 (1 b)) (4 (2 c) (3 d) (1 e)))\n", "t.txt", 3);
  const SentimentTree& t = trees[0];
  REQUIRE(t.size() == 8);
  CHECK(t.shape.arity() == 3);
  CHECK(std::vector<int32_t>(t.shape.children(2).begin(), t.shape.children(2).end()) == std::vector<int32_t>{1});
  CHECK(std::vector<int32_t>(t.shape.children(6).begin(), t.shape.children(6).end()) == std::vector<int32_t>{3, 4, 5});
  CHECK(std::vector<int32_t>(t.shape.children(7).begin(), t.shape.children(7).end()) == std::vector<int32_t>{0, 2, 6});
  CHECK_ERROR_MENTIONS(parse_trees("(3 (2 a) (2 b) (2 c) (2 d))", "t.txt", 3),
                       "t.txt:1:22: a node with more than 3 children (data.max_children)");
  CHECK_ERROR_MENTIONS(parse_trees("(2 a)", "t.txt", 1), "max_children >= 2");
  // The forest keeps each node's children, shifted past the trees before it.
  const Forest f = make_forest({&trees[0], &trees[0]});
  CHECK(std::vector<int32_t>(f.nodes.shape.children(15).begin(), f.nodes.shape.children(15).end()) ==
        std::vector<int32_t>{8, 10, 14});
}

TEST_CASE("treebank sources: the SST's folder, and bracketed files of any arity named in the config") {
  const testing::TempDir dir;
  for (const char* name : {"train.txt", "dev.txt", "test.txt", "other.txt"}) {
    std::ofstream(dir / name) << "(3 (2 a) (4 b) (3 c))\n(1 (1 d))\n";
  }
  CHECK_ERROR_MENTIONS(load_treebank("sst", dir.path(), {}), "train.txt:1:16: a node with 3 children (trees are binary)");
  const SentimentTreebank bank = load_treebank("bracketed", dir.path(), {{"max_children", int64_t{3}}, {"dev", "other.txt"}});
  CHECK(bank.train.size() == 2);
  CHECK(bank.dev[0].shape.arity() == 3);
  CHECK_ERROR_MENTIONS(load_treebank("bracketed", dir.path(), {{"test", "missing.txt"}, {"max_children", int64_t{3}}}), "missing.txt: no such file of trees");
  CHECK_ERROR_MENTIONS(load_treebank("bracketed", dir.path(), {{"max_children", int64_t{1}}}), "max_children");
  CHECK_ERROR_MENTIONS(load_treebank("penn", dir.path(), {}), "penn");
  CHECK_ERROR_MENTIONS(load_treebank("sst", dir / "nowhere", {}), "no such folder of treebank files");
}

TEST_CASE("tasks: fine keeps 0..4, binary drops neutral and merges the rest") {
  CHECK(task_label(SentimentTask::Fine, 2) == 2);
  CHECK(task_label(SentimentTask::Binary, 0) == 0);
  CHECK(task_label(SentimentTask::Binary, 1) == 0);
  CHECK(task_label(SentimentTask::Binary, 2) == -1);
  CHECK(task_label(SentimentTask::Binary, 3) == 1);
  CHECK(task_label(SentimentTask::Binary, 4) == 1);
  CHECK(parse_sentiment_task("binary") == SentimentTask::Binary);
  CHECK_THROWS_AS(parse_sentiment_task("coarse"), Error);
  CHECK(task_classes(SentimentTask::Fine) == 5);
}

}  // namespace test_sst
