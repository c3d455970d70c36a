// Greedy layer-wise denoising-autoencoder pre-training (Vincent et al. 2008), the "+" of
// the paper's PEA+ column: each hidden layer of a network, in turn, is trained as the
// encoder of an autoencoder (models/autoencoder.h) that reconstructs the layer's clean
// input from a corrupted copy; the network's own weights come out pre-trained, ready for
// PEA fine-tuning.
#pragma once

#include <string>

#include "pens/models/dataset.h"
#include "pens/train/config/pretrain_config.h"
#include "pens/train/loop/observer.h"

namespace pens {

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
