// A ladder network (Rasmus et al. 2015) as a pseudo-ensemble: the clean encoder is the
// parent, the corrupted encoder (Gaussian noise on the input and on every normalised
// pre-activation) is its one child, which also carries the supervised loss, and the
// decoder is part of the child's network: from the top, each layer's reconstruction
// ẑ = g(z̃, u) combines the child's noisy z̃ with the signal u coming down from the layer
// above. The denoising costs are penalties of kind l2 between the child's reconstruction
// and the clean parent's value (PenaltyTerm::target): the per-layer agreement of the
// paper's section 3 with a learnt denoiser in between.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "pens/serialization/model.h"

namespace pens {

struct LadderSpec {
  std::vector<int64_t> layers = {784, 1000, 500, 250, 250, 250, 10};  // widths, input first
  double noise = 0.3;  // σ of the Gaussian noise on every z, and on the input unless:
  // σ on the input where it differs: the ladder paper's code sets the two apart (its
  // super_noise_std on the input, f_local_noise_std on the layers; with 1000 labels 0.3
  // and 0.2).
  std::optional<double> input_noise = std::nullopt;
  // Weight of each layer's denoising cost, input first (one per width): the cost is
  // λ_l times the mean over the layer's units of the squared error, as the ladder paper
  // weighs it for permutation-invariant MNIST (1000, 10, 0.1, ...).
  std::vector<double> denoising = {1000, 10, 0.1, 0.1, 0.1, 0.1, 0.1};
  double batch_norm_decay = 0.99;  // of the encoder's running statistics
  // Whose batch statistics normalise the child's estimates before the cost (ẑ_BN): the
  // clean encoder's, read through parent_value nodes, as the ladder paper writes it;
  // false: the child's own (the corrupted batch's), the first version's choice.
  bool clean_estimate_statistics = true;
};

// Node names, for layer l = 1..L (L the last): a<l> = h<l-1>·W<l> (h0 is x), its batch
// statistics z<l>/mean and z<l>/var, the normalised z<l> (noise: gaussian), h<l> =
// relu(z<l> + beta<l>) for hidden layers and logits = gamma<L> ⊙ (z<L> + beta<L>)
// (flagged output); p = softmax(logits). Decoder: u<l> (the batch-normalised signal from
// above: of p for l = L, of zhat<l+1>·V<l+1> below), zhat<l> = the combinator of z<l>
// and u<l> with parameters g<l>/a1 .. g<l>/a10 (x and xhat at l = 0), and zhat<l>/bn,
// zhat<l> normalised with z<l>'s batch statistics (the clean encoder's, through
// z<l>/mean/clean and z<l>/var/clean, parent_value nodes), the value the cost compares
// with z<l>. Layer tags "in", "l1" .. "l<L>". The running statistics are moving averages
// of the clean encoder's batch statistics. The model carries its pseudo-ensemble: one
// child, parent-child pairing, the loss on the child, an l2 penalty per layer with its
// target.
Model build_ladder(const LadderSpec& spec);

}  // namespace pens
