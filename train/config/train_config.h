// The config of a training run (pens train CONFIG.json; docs/training.md): the model,
// the data split, the batch composition, the optimizer and its schedules, the length,
// evaluation and checkpoint cadence.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "pens/graph/pseudo_ensemble.h"
#include "pens/ops/ir/attributes.h"
#include "pens/ops/precision.h"
#include "pens/serialization/model.h"
#include "pens/train/optim/groups.h"
#include "pens/train/optim/schedule.h"
#include "pens/train/optim/transform.h"

namespace pens {

// Epochs [from, to) in which only the named parameters are updated (a lambda stage's
// "trainable"); the others are held as they are (HoldParameters, train/optim/transform.h).
struct TrainablePeriod {
  double from = 0;
  double to = 0;
  std::vector<std::string> parameters;
  bool operator==(const TrainablePeriod&) const = default;
};

struct TrainConfig {
  std::string description;  // free text: what the config is for
  std::string source;  // the config file it was read from, which errors name (not written by to_json)
  std::string model;   // model file (a path relative to the config file is resolved against it)
  // Operations applied to the model file's JSON before it is read (serialization/json_patch.h),
  // as JSON text; "" for none: a variant of a model (another eps, an added penalty) as a config.
  std::string model_patch;
  // A trained model file (pens pretrain's, say) whose parameter values, matched by name and
  // shape, replace the model's initial ones; "" for none. Relative paths as for `model`.
  std::string init_from;
  // Data: the split of the training set.
  // Where the examples come from: a registered data source (models/data_source.h), its
  // folder and its settings (the data section's other fields).
  std::string data_source = "mnist";
  std::string data_dir = "data/mnist";
  Attributes data_settings;
  int64_t labeled = 0;         // 0: every example outside the validation set is labeled
  int64_t validation = 10000;  // held out of the training set; 0: none
  uint64_t split_seed = 1;
  // The validation images join the unlabeled pool (their labels are read only to pick the
  // model), as the ladder and VAT papers' final runs train on all 60,000 MNIST images.
  bool unlabeled_validation = false;
  // Rows of each step's batch: the first `batch_labeled` carry labels (the supervised
  // loss reads them), the next `batch_unlabeled` do not (only penalties read them).
  int64_t batch_labeled = 100;
  int64_t batch_unlabeled = 0;
  // Computed as this many equal shards (a power of two), each shard's gradient on its own,
  // added in a fixed pairwise order: the run is then the same, bit for bit, on any number
  // of processes that divides it (docs/distributed.md). 1: the batch at once.
  int64_t batch_shards = 1;
  // The optimizer: a registered kind (train/optim/optimizer.h) and its own settings.
  std::string optimizer = "sgd";
  Attributes optimizer_settings;
  // Parameters updated by optimizers of their own (optimizer.groups, train/optim/groups.h).
  std::vector<OptimizerGroup> optimizer_groups;
  // Gradient transforms before the optimizer (optimizer.transforms: ℓ2, holds).
  std::vector<TransformSpec> transforms;
  // Learning rate and momentum; the λ stages come from the model unless set below.
  Schedule schedule{.learning_rate = 0.1,
                    .warmup_epochs = 5,
                    .decay = 0.998,
                    .momentum_start = 0.5,
                    .momentum_end = 0.99,
                    .momentum_epochs = 500,
                    .lambda_stages = {}};
  std::string max_norm_rule = "unit-incoming";  // or input-outgoing-squared (train/optim/constraints.h)
  // Overrides the model's lambda stages when set.
  std::optional<std::vector<LambdaStage>> lambda_schedule;
  // From the stages' "trainable" lists; each period starts the run or a restart.
  std::vector<TrainablePeriod> trainable_periods;
  // Length: `epochs` of `steps_per_epoch` steps, or less when `budget_minutes` (> 0) runs out.
  int64_t epochs = 600;
  int64_t steps_per_epoch = 250;
  double budget_minutes = 0;
  // > 0: the run ends after an evaluation once its best validation error is this many
  // epochs old (train/loop/run_loop.h, RunLength::patience_epochs).
  double patience_epochs = 0;
  uint64_t seed = 1;       // noise keys and batch order
  uint64_t init_seed = 1;  // parameter initialization, when the model file holds no values
  int threads = 0;  // 0: every CPU this process may use (ops/parallel.h)
  // The matrix products' precision and kernel (ops/precision.h): "precision": "bfloat16"
  // or "float32-onednn" in the config.
  Precision precision = Precision::Float32;
  double eval_every_epochs = 1;
  int64_t eval_batch = 1000;
  int64_t train_error_examples = 10000;  // labeled examples the train error is measured on
  // > 0: before each evaluation, running statistics become the mean of this many training
  // examples' batch statistics under the weights inference reads (StatisticsRecalibration).
  int64_t recalibrate_statistics = 0;
  double checkpoint_every_epochs = 10;
  int64_t checkpoint_keep = 3;  // checkpoints kept on disk, the latest included
};

// Reads a config. Unknown keys and bad values are Errors naming the field; `source`
// names the config in them.
TrainConfig parse_train_config(const nlohmann::json& j, const std::string& source);

// The model file a config names (`source`: the config), with the config's model_patch
// applied ("" for none), for training: errors name the config and its field, and a model
// whose noise no child draws is refused (undrawn_noise). MNIST and tree runs both load
// their model through it.
Model load_configured_model(const std::string& source, const std::string& path, const std::string& patch);
nlohmann::json to_json(const TrainConfig& c);

}  // namespace pens
