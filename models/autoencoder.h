// Denoising autoencoders of a network's layers (Vincent et al. 2008), the models greedy
// pre-training trains (train/tasks/pretrain.h): the "+" of the paper's PEA+ column.
//
// The autoencoder is an ordinary pens model: the corruption is noise annotations on its
// input, its one child carries the loss (build_pseudo_ensemble does the rest), and its
// encoder names the network's own parameter nodes, so the trained values belong to the
// network by name.
#pragma once

#include <string>
#include <vector>

#include "pens/graph/graph.h"
#include "pens/serialization/model.h"

namespace pens {

struct AutoencoderSpec {
  std::string node;  // the encoder's affine node in the network ("a1"); its W and b are trained
  std::vector<NoiseAnnotation> corruption;  // on the layer's input, in this order
  double l1 = 0;  // weight of the L1 activity penalty, mean over rows of Σ|code|
  // Weight of the authors' sparsity cost: the code's L1 with each row scaled to unit norm
  // (mean over rows) plus with each column scaled to unit norm over the batch (mean over
  // columns), which favours few active units per example and few examples per unit.
  double sparsity = 0;
  // σ of Gaussian noise on W, drawn each step and used by encoder and decoder (the
  // authors' "noisy weights"); gradients reach W. 0: none.
  double weight_noise = 0;
};

// The denoising autoencoder of one layer of `network`, as a model with a pseudo-ensemble
// of one child that carries the loss. Nodes:
//   x [B, n_in]       the layer's input, annotated with spec.corruption
//   target [B, n_in]  the same rows, clean: what is reconstructed
//   code              the network's affine node (same W, b) and its activation
//   recon             matmul(code, W, transpose_b) + "<node>/visible_bias": the decoder
//                     shares W with the encoder, so W's gradient adds both uses
//   recon_error       ‖recon − target‖² per row; its mean is the loss
//                     (+ l1 · mean Σ|code|, + sparsity · the normalised L1s)
// With weight_noise, W carries a "fuzz" annotation: the one child computes with W + noise.
// The activation is the affine node's only consumer and must be elementwise.
Model denoising_autoencoder(const Graph& network, const AutoencoderSpec& spec);

}  // namespace pens
