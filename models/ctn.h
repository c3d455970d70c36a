// The paper's compact tensor network (CTN, section 5) as a tree cell (graph/tree.h):
//   leaf:     v = E[word]                               (leaf_tanh: tanh(E[word]))
//   compose:  v = tanh(v1ᵀ T_k v2 + M [v1; v2; 1])    T: n×n×n, M: n×(2n+1)
//   scores:   C [v; 1]                                 C: classes×(n+1)
// M is held as its three blocks (Ml, Mr, m) and C as (C, c): the same function, and each
// block can be sliced by subspace sampling along the latent axes it has.
#pragma once

#include <cstdint>
#include <string>

#include "pens/serialization/model.h"

namespace pens {

struct CtnSpec {
  int64_t vocabulary = 0;  // rows of E, <unk> included
  int64_t dim = 70;        // n
  int64_t classes = 5;
  std::string tensor = "compact";  // compact: T n×n×n on (v1, v2); full: the RNTN's n×2n×2n on [v1; v2]
  // Noise annotations (0: none): what a child of the model perturbs.
  double fuzz = 0;             // weight fuzzing σ on E, T, M, C (the paper: 0.02)
  int64_t subspace = 0;        // latent dimensions kept per tree (the paper: n/2)
  double activation_noise = 0; // Gaussian σ on every node vector (the paper: 0.05)
  // leaf v = tanh(E[word]) instead of E[word], as the authors' code computes it: leaves then
  // live in (-1, 1) like every composed node.
  bool leaf_tanh = false;
  // Initialization. "scaled": every weight drawn around zero at a scale that keeps
  // pre-activations near unit size. "authors": the authors' code's (after Socher et al.'s
  // RNTN): Ml and Mr the identity plus U(±1/(2√n)), T U(±1/(2 t_in)), C U(±1/√n), so a
  // new node starts near tanh(v1 + v2).
  std::string init = "scaled";
  double word_std = 0.1;
};

// Parameter names: E [vocabulary, n]; T [n, n, n] (full: [n, 2n, 2n]); Ml, Mr [n, n]; m [n];
// C [n, classes]; c [classes]. Ports: words, leaf, left, right, compose, node, scores.
// With noise, the model carries a pseudo-ensemble of one child that carries the loss.
Model build_ctn(const CtnSpec& spec);

}  // namespace pens
