// A treebank source defined outside pens: sentences labeled as a whole, one per line as
// "label<TAB>word word ...", for a tree model with no parse trees to go on. Each sentence
// becomes a right-branching binary tree over its words whose root alone carries the label
// (the phrases below it have none: no loss, not scored). Register it once at start-up:
//   pens::TreebankSourceRegistry::register_global(sentence_source());
// then a tree config's "data": {"source": "sentences", "dir": "..."} reads train.tsv,
// dev.tsv and test.tsv from that folder.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "pens/models/treebank_source.h"
#include "pens/ops/ir/error.h"

// One sentence's tree: leaves w0 .. w(n-1), then (w(n-2) w(n-1)), (w(n-3) (...)), ...
inline pens::SentimentTree sentence_tree(int label, const std::vector<std::string>& words) {
  pens::SentimentTree t;
  for (const std::string& w : words) {
    t.shape.add({});
    t.word.push_back(w);
  }
  int32_t right = static_cast<int32_t>(words.size()) - 1;
  for (int32_t left = right - 1; left >= 0; --left) right = t.shape.add({left, right});
  t.word.resize(static_cast<size_t>(t.size()));
  t.label.assign(static_cast<size_t>(t.size()), -1);
  t.label.back() = static_cast<int8_t>(label);
  t.word_id.assign(static_cast<size_t>(t.size()), -1);
  return t;
}

inline std::vector<pens::SentimentTree> read_sentences(const std::string& path) {
  std::ifstream in(path);
  if (!in) pens::fail(path, ": no such file of sentences");
  std::vector<pens::SentimentTree> trees;
  int64_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const size_t tab = line.find('\t');
    if (tab != 1 || line[0] < '0' || line[0] > '4') {
      pens::fail(path, ":", number, ": expected a label 0..4, a tab and the sentence's words");
    }
    std::istringstream words_in(line.substr(tab + 1));
    std::vector<std::string> words;
    for (std::string w; words_in >> w;) words.push_back(w);
    if (words.empty()) pens::fail(path, ":", number, ": a sentence without words");
    trees.push_back(sentence_tree(line[0] - '0', words));
    trees.back().line = number;
  }
  if (trees.empty()) pens::fail(path, ": no sentences");
  return trees;
}

inline pens::TreebankSourceKind sentence_source() {
  return {.name = "sentences",
          .summary = "sentences labeled as a whole (label<TAB>words), as right-branching trees",
          .settings = {},
          .load = [](const std::string& dir, const pens::Attributes&) {
            return pens::SentimentTreebank{read_sentences(dir + "/train.tsv"), read_sentences(dir + "/dev.tsv"),
                                           read_sentences(dir + "/test.tsv")};
          }};
}
