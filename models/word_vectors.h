// Pre-trained word vectors for a tree model's word table, from a text file in GloVe's
// format: one word a line, then its values, separated by spaces (word2vec's text format,
// whose first line is "COUNT DIMENSION", is read too). A tree config's `word_vectors`
// names the file (docs/trees.md); scripts/fetch-glove.sh writes one.
//
// The file is streamed line by line and only the vocabulary's words are kept, so a file of
// millions of words costs the table's memory, not its own.
#pragma once

#include <cstdint>
#include <string>

#include "pens/models/sst.h"
#include "pens/ops/tensor.h"

namespace pens {

// The word a treebank's escape stands for, as running text writes it (-LRB- is "(", \/ is
// "/", `` and '' are '"'; case kept), or the word itself.
std::string plain_text_word(const std::string& word);

struct WordVectorsLoaded {
  int64_t words = 0;  // vocabulary words whose row was filled
  int64_t lines = 0;  // vectors the file holds
};

// Fills row id of `table` ([vocabulary size, d]) with the vector of vocabulary word id, for
// every word the file has; the other rows keep their values. A word is looked up as the
// vocabulary holds it, then in its plain-text form, then with its ASCII letters
// lowercased (GloVe's common vectors are lowercase): the first form the file has wins.
// <unk> (id 0) is left alone. Errors name the file and line: a value that is not a finite
// number, a line with another number of values than the first, vectors of another width
// than the table's, a missing or non-regular file.
WordVectorsLoaded load_word_vectors(const std::string& path, const Vocabulary& vocabulary, TensorView<float> table);

}  // namespace pens
