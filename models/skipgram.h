// Skip-gram with negative sampling (Mikolov et al. 2013) as a pens graph: the word-vector
// pre-training the paper uses for its tree networks, with tanh and dropout on the centre
// word's vector (the authors' code has tanh and dropout in the pre-training path).
#pragma once

#include <cstdint>

#include "pens/graph/graph.h"

namespace pens {

struct SkipgramSpec {
  int64_t vocabulary = 0;
  int64_t dim = 70;
  double dropout = 0.2;  // on tanh(E[centre]); 0: none
};

// Inputs, one row per (centre, candidate) pair: "centre" and "candidate" word ids [-1],
// "sign" [-1] (+1 for an observed context word, -1 for a sampled negative). Parameters:
// "E" [vocabulary, dim] (the word vectors, named as the tree network's) and "O" (output
// vectors). Loss "loss" = mean over rows of -log σ(sign · tanh(E[centre])ᵀ O[candidate]).
Graph build_skipgram(const SkipgramSpec& spec);

}  // namespace pens
