// Greedy layer-wise denoising-autoencoder pre-training (Vincent et al. 2008), the "+" of
// the paper's PEA+ column: each hidden layer of a network, in turn, is trained as the
// encoder of an autoencoder that reconstructs the layer's clean input from a corrupted
// copy; the network's own weights come out pre-trained, ready for PEA fine-tuning.
//
// The autoencoder is an ordinary pens model: the corruption is noise annotations on its
// input, its one child carries the loss (build_pseudo_ensemble does the rest), and its
// encoder names the network's own parameter nodes, so the trained values belong to the
// network by name.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graph/node.h"
#include "models/dataset.h"
#include "models/model.h"
#include "models/trainer.h"

namespace pens {

struct AutoencoderSpec {
  std::string node;  // the encoder's affine node in the network ("a1"); its W and b are trained
  std::vector<NoiseAnnotation> corruption;  // on the layer's input, in this order
  double l1 = 0;  // weight of the L1 activity penalty, mean over rows of Σ|code|
};

// The denoising autoencoder of one layer of `network`, as a model with a pseudo-ensemble
// of one child that carries the loss. Nodes:
//   x [B, n_in]       the layer's input, annotated with spec.corruption
//   target [B, n_in]  the same rows, clean: what is reconstructed
//   code              the network's affine node (same W, b) and its activation
//   recon             matmul(code, W, transpose_b) + "<node>/visible_bias": the decoder
//                     shares W with the encoder, so W's gradient adds both uses
//   loss              mean over rows of ‖recon − target‖²  (+ l1 · mean Σ|code|)
// The activation is the affine node's only consumer and must be elementwise.
Model denoising_autoencoder(const Graph& network, const AutoencoderSpec& spec);

struct PretrainLayer {
  AutoencoderSpec autoencoder;
  int64_t epochs = 40;
};

struct PretrainConfig {
  std::string description;
  std::string model;  // the network; relative paths as in TrainConfig
  std::string data_dir = "data/mnist";
  std::vector<PretrainLayer> layers;  // trained in this order; each reads the one below, clean
  int64_t batch = 100;
  int64_t steps_per_epoch = 600;  // 600 × 100 = one pass over the 60,000 training images
  double learning_rate = 0.01;    // η_t = learning_rate · decay^t, t in epochs of the layer
  double decay = 1;
  double momentum = 0.9;
  uint64_t seed = 1;       // noise keys and batch order
  uint64_t init_seed = 1;  // the network's initial values, when its model file has none
  int threads = 2;
};

PretrainConfig parse_pretrain_config(const nlohmann::json& j, const std::string& source);
nlohmann::json to_json(const PretrainConfig& c);

// Pre-trains the layers of config.model on `images` (labels unused) into `out_dir`:
// metrics.jsonl (one line per layer and epoch: the training objective, and on the first
// 10,000 images the mean squared error of reconstructing them from a fixed corruption,
// "denoising_error", and from no corruption, "clean_reconstruction"),
// model.json (the network, every parameter valued, the pre-trained ones from here),
// summary.json, filters.png. Stops at a non-finite objective or parameter with a message
// naming layer and step (model.json is then not written); returns the summary.
TrainSummary pretrain(const PretrainConfig& config, const Dataset& images, const std::string& out_dir,
                      TrainObserver& observer);

}  // namespace pens
