// Pre-trained word vectors read into a word table: which rows they fill, by which form of a
// word, and the errors a bad file gets (file and line named).
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "pens/models/sst.h"
#include "pens/models/word_vectors.h"
#include "pens/ops/ir/error.h"
#include "tests/support/helpers.h"
#include "tests/support/temp_dir.h"

namespace test_word_vectors {

using namespace pens;
using pens::testing::TempDir;

namespace {

// The vocabulary of one sentence's words (ids in sorted order after <unk>: -LRB-, Good,
// film, good, writer\/director).
Vocabulary vocabulary_of(const VocabularyPolicy& policy = {}) {
  const std::vector<SentimentTree> trees =
      parse_trees("(3 (2 (2 -LRB-) (3 Good)) (3 (2 film) (3 (3 good) (2 writer\\/director))))\n", "t.txt");
  return Vocabulary::from_trees(trees, policy);
}

std::string write(const TempDir& dir, const std::string& text) {
  const std::string path = dir / "vectors.txt";
  std::ofstream(path) << text;
  return path;
}

std::vector<float> table_of(const Vocabulary& v, int64_t width, float fill) {
  return std::vector<float>(static_cast<size_t>(v.size() * width), fill);
}

std::vector<float> row(const std::vector<float>& table, int64_t width, int32_t id) {
  return {table.begin() + id * width, table.begin() + (id + 1) * width};
}

}  // namespace

TEST_CASE("a treebank's escapes read as the words they stand for") {
  CHECK(plain_text_word("-LRB-") == "(");
  CHECK(plain_text_word("-rrb-") == ")");
  CHECK(plain_text_word("``") == "\"");
  CHECK(plain_text_word("writer\\/director") == "writer/director");
  CHECK(plain_text_word("a\\*b") == "a*b");
  CHECK(plain_text_word("Good") == "Good");
  CHECK(plain_text_word("\\") == "\\");
}

TEST_CASE("vectors fill the rows of the vocabulary's words, the word as held before its plain or lowercase form") {
  TempDir dir;
  const Vocabulary v = vocabulary_of();
  REQUIRE(v.size() == 6);
  const int32_t lrb = v.id("-LRB-"), good_capital = v.id("Good"), film = v.id("film"), good = v.id("good"),
                slash = v.id("writer\\/director");
  // "good" comes before "Good" in the file: Good still takes its own vector, and a word
  // given twice keeps its first.
  const std::string path = write(dir,
                                 "good 1 2\n"
                                 "( 3 4\n"
                                 "Good 5 6\n"
                                 "writer/director 7 8\n"
                                 "unused 9 9\n"
                                 "good 0 0\n");
  std::vector<float> table = table_of(v, 2, -1.0f);
  const WordVectorsLoaded loaded = load_word_vectors(path, v, {table.data(), Shape{v.size(), 2}});
  CHECK(loaded.lines == 6);
  CHECK(loaded.words == 4);
  CHECK(row(table, 2, good) == std::vector<float>{1, 2});
  CHECK(row(table, 2, good_capital) == std::vector<float>{5, 6});
  CHECK(row(table, 2, lrb) == std::vector<float>{3, 4});
  CHECK(row(table, 2, slash) == std::vector<float>{7, 8});
  CHECK(row(table, 2, film) == std::vector<float>{-1, -1});                   // not in the file: kept
  CHECK(row(table, 2, Vocabulary::kUnknown) == std::vector<float>{-1, -1});  // <unk> is never filled

  SUBCASE("a word the file has only in lowercase takes the lowercase vector; word2vec's header is skipped") {
    const std::string lower = write(dir, "2 2\ngood 1 2\nfilm 3 4\r\n");
    std::vector<float> t = table_of(v, 2, -1.0f);
    CHECK(load_word_vectors(lower, v, {t.data(), Shape{v.size(), 2}}).words == 3);
    CHECK(row(t, 2, good_capital) == std::vector<float>{1, 2});
    CHECK(row(t, 2, film) == std::vector<float>{3, 4});
  }
  SUBCASE("a lowercased vocabulary finds the same vectors") {
    const Vocabulary lowered = vocabulary_of({.min_count = 1, .lowercase = true});
    std::vector<float> t = table_of(lowered, 2, -1.0f);
    CHECK(load_word_vectors(path, lowered, {t.data(), Shape{lowered.size(), 2}}).words == 3);
    CHECK(row(t, 2, lowered.id("good")) == std::vector<float>{1, 2});
    CHECK(row(t, 2, lowered.id("-lrb-")) == std::vector<float>{3, 4});
  }
}

TEST_CASE("a bad vectors file is refused, naming the file, the line and what is wrong") {
  TempDir dir;
  const Vocabulary v = vocabulary_of();
  std::vector<float> table = table_of(v, 2, 0.0f);
  const TensorView<float> view{table.data(), Shape{v.size(), 2}};
  CHECK_ERROR_MENTIONS(load_word_vectors(write(dir, "good 1 2 3\n"), v, view), "vectors.txt:1",
                       "vectors of 3 values, but the word table has 2 columns");
  CHECK_ERROR_MENTIONS(load_word_vectors(write(dir, "good 1 2\nfilm 1\n"), v, view), "vectors.txt:2",
                       "1 values where the lines before have 2");
  CHECK_ERROR_MENTIONS(load_word_vectors(write(dir, "good 1 x\n"), v, view), "vectors.txt:1",
                       "value 2 of 'good' is 'x', not a finite number");
  CHECK_ERROR_MENTIONS(load_word_vectors(write(dir, "good 1 nan\n"), v, view), "value 2 of 'good' is 'nan'");
  CHECK_ERROR_MENTIONS(load_word_vectors(write(dir, "good 1 2\n\nfilm 1 2\n"), v, view), "vectors.txt:2",
                       "an empty line");
  CHECK_ERROR_MENTIONS(load_word_vectors(write(dir, ""), v, view), "holds no word vectors");
  CHECK_ERROR_MENTIONS(load_word_vectors(dir / "absent.txt", v, view), "absent.txt", "no such file of word vectors");
  CHECK_ERROR_MENTIONS(load_word_vectors(dir.path(), v, view), "no such file of word vectors");  // a folder
  std::vector<float> short_table(4, 0.0f);
  CHECK_ERROR_MENTIONS(load_word_vectors(write(dir, "good 1 2\n"), v, {short_table.data(), Shape{2, 2}}),
                       "the word table is [2,2] but the vocabulary has 6 words");
}

}  // namespace test_word_vectors
