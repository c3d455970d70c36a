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
#include "pens/train/loop/run_folder.h"

namespace pens {

// Pre-trains the layers of config.model on `images` (labels unused) into `out_dir` through
// the run loop (train/loop/run_loop.h), a stage per layer: metrics.jsonl (per layer, a line
// before training and one after every epoch: the training objective, and on the first
// 10,000 images the mean squared error of reconstructing them from a fixed corruption,
// "denoising_error", and from no corruption, "clean_reconstruction"), checkpoints (with
// `resume`, the run continues from one exactly as an unbroken run would), model.json (the
// network, every parameter valued, the pre-trained ones from here), summary.json (its
// "layers": each layer's errors before and after), filters.png. A budget stops it at the
// first step past it; a non-finite objective or parameter stops it with the last good
// checkpoint kept (model.json is then not written).
TrainSummary pretrain(const PretrainConfig& config, const Dataset& images, const std::string& out_dir,
                      TrainObserver& observer, const Resume& resume = {});

}  // namespace pens
