// The bilinear op's weight gradient over many rows at once, for a caller that gathers the
// rows of several bilinear nodes sharing T (the levels of a tree, autodiff/tree_tape.h):
// one product over all of them instead of one per node, each of which would read and
// write all of dT.
#pragma once

#include <cstdint>
#include <vector>

#include "pens/ops/tensor.h"

namespace pens {

// dT[k, i, j] += Σ_b dy[b, k] v1[b, i] v2[b, j] for T of shape [k, n, m]: v1 [B, n],
// v2 [B, m], dy [B, k]. `outer` is scratch (resized to B × n·m).
void add_bilinear_weight_gradient(TensorView<const float> v1, TensorView<const float> v2,
                                  TensorView<const float> dy, TensorView<float> dt, std::vector<float>& outer);

}  // namespace pens
