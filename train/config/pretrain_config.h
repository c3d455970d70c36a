// The config of greedy layer-wise pre-training (pens pretrain CONFIG.json;
// docs/training.md): which layers, their corruption, the optimizer, the length and budget,
// and the checkpoints.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "pens/models/autoencoder.h"
#include "pens/train/optim/schedule.h"

namespace pens {

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
  // SGD's learning rate and momentum over each layer's time in fractional epochs (the
  // config's "momentum" sets both ends of the ramp); no λ stages or restarts
  Schedule schedule{.learning_rate = 0.01, .momentum_start = 0.9, .momentum_end = 0.9};
  std::string max_norm_rule = "unit-incoming";  // for W's max_norm (train/optim/constraints.h)
  uint64_t seed = 1;       // noise keys and batch order
  uint64_t init_seed = 1;  // the network's initial values, when its model file has none
  int threads = 0;  // 0: every CPU this process may use (ops/parallel.h)
  double budget_minutes = 0;  // > 0: the run stops at the first step past it (run.budget_minutes)
  double checkpoint_every_epochs = 1;
  int64_t checkpoint_keep = 1;  // checkpoints kept on disk, the latest included
};

PretrainConfig parse_pretrain_config(const nlohmann::json& j, const std::string& source);
nlohmann::json to_json(const PretrainConfig& c);

}  // namespace pens
