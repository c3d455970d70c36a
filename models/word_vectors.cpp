#include "pens/models/word_vectors.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pens/ops/ir/error.h"

namespace pens {

std::string plain_text_word(const std::string& word) {
  static const std::unordered_map<std::string, std::string> escapes = {
      {"-LRB-", "("}, {"-RRB-", ")"}, {"-LSB-", "["}, {"-RSB-", "]"}, {"-LCB-", "{"}, {"-RCB-", "}"},
      {"-lrb-", "("}, {"-rrb-", ")"}, {"-lsb-", "["}, {"-rsb-", "]"}, {"-lcb-", "{"}, {"-rcb-", "}"},
      {"``", "\""},   {"''", "\""}};
  if (const auto it = escapes.find(word); it != escapes.end()) return it->second;
  // The treebank writes a slash or an asterisk inside a word as \/ and \*.
  std::string plain;
  plain.reserve(word.size());
  for (size_t i = 0; i < word.size(); ++i) {
    if (word[i] == '\\' && i + 1 < word.size() && (word[i + 1] == '/' || word[i + 1] == '*')) continue;
    plain.push_back(word[i]);
  }
  return plain;
}

namespace {

// The forms a vocabulary word is looked up by, best first: as held, plain text, lowercased.
std::vector<std::string> lookup_forms(const std::string& word) {
  std::vector<std::string> forms{word};
  const std::string plain = plain_text_word(word);
  for (std::string form : {plain, ascii_lowercase(plain)}) {
    if (std::find(forms.begin(), forms.end(), form) == forms.end()) forms.push_back(std::move(form));
  }
  return forms;
}

// The space-separated fields of a line, trailing spaces and a carriage return dropped.
std::vector<std::string_view> fields_of(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  std::vector<std::string_view> fields;
  size_t at = 0;
  while (at < line.size()) {
    const size_t end = std::min(line.find(' ', at), line.size());
    if (end > at) fields.push_back(line.substr(at, end - at));
    at = end + 1;
  }
  return fields;
}

bool is_count(std::string_view s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && v >= 0;
}

}  // namespace

WordVectorsLoaded load_word_vectors(const std::string& path, const Vocabulary& vocabulary, TensorView<float> table) {
  if (!std::filesystem::is_regular_file(path)) fail(path, ": no such file of word vectors (scripts/fetch-glove.sh writes one)");
  if (table.shape.rank != 2 || table.shape[0] != vocabulary.size()) {
    fail("word vectors ", path, ": the word table is ", table.shape.str(), " but the vocabulary has ", vocabulary.size(),
         " words");
  }
  const int64_t width = table.shape[1];
  // Each form a vocabulary word is looked up by, with the word's id and the form's rank.
  std::unordered_map<std::string, std::vector<std::pair<int32_t, int>>> wanted;
  for (int32_t id = 1; id < vocabulary.size(); ++id) {
    const std::vector<std::string> forms = lookup_forms(vocabulary.word(id));
    for (size_t rank = 0; rank < forms.size(); ++rank) wanted[forms[rank]].emplace_back(id, static_cast<int>(rank));
  }
  std::vector<int> filled_rank(static_cast<size_t>(vocabulary.size()), std::numeric_limits<int>::max());

  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot be read");
  WordVectorsLoaded loaded;
  std::string line;
  std::vector<float> values(static_cast<size_t>(width));
  for (int64_t number = 1; std::getline(in, line); ++number) {
    const std::vector<std::string_view> fields = fields_of(line);
    if (fields.empty()) fail(path, ":", number, ": an empty line (a line is a word and its values)");
    if (number == 1 && fields.size() == 2 && is_count(fields[0]) && is_count(fields[1])) continue;  // word2vec's header
    const auto given = static_cast<int64_t>(fields.size()) - 1;
    if (given != width) {
      if (loaded.lines == 0) {
        fail(path, ":", number, ": vectors of ", given, " values, but the word table has ", width,
             " columns (a model whose word table is as wide as the vectors)");
      }
      fail(path, ":", number, ": ", given, " values where the lines before have ", width);
    }
    ++loaded.lines;
    const auto found = wanted.find(std::string(fields[0]));
    if (found == wanted.end()) continue;
    for (int64_t j = 0; j < width; ++j) {
      const std::string_view field = fields[static_cast<size_t>(j) + 1];
      float& v = values[static_cast<size_t>(j)];
      const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
      if (ec != std::errc() || end != field.data() + field.size() || !std::isfinite(v)) {
        fail(path, ":", number, ": value ", j + 1, " of '", fields[0], "' is '", field, "', not a finite number");
      }
    }
    for (const auto& [id, rank] : found->second) {
      int& best = filled_rank[static_cast<size_t>(id)];
      if (rank >= best) continue;
      loaded.words += best == std::numeric_limits<int>::max();
      best = rank;
      std::copy(values.begin(), values.end(), table.data + static_cast<int64_t>(id) * width);
    }
  }
  if (in.bad()) fail(path, ": reading failed after ", loaded.lines, " vectors");
  if (loaded.lines == 0) fail(path, ": holds no word vectors");
  return loaded;
}

}  // namespace pens
