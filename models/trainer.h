// Training a model file's pseudo-ensemble on a classification data set: the
// semi-supervised protocol (class-balanced labeled set, validation set, the rest
// unlabeled), SGD with the authors' schedules (learning-rate warm-up and decay, momentum
// ramp, the model's lambda stages), evaluation of the clean parent, checkpoints, and a
// run directory a researcher can read: metrics.jsonl, summary.json, the trained model.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "autodiff/tape.h"
#include "graph/pseudo_ensemble.h"
#include "models/dataset.h"

namespace pens {

struct TrainConfig {
  std::string description;  // free text: what the config is for
  std::string model;  // model file (a path relative to the config file is resolved against it)
  // A trained model file (pens pretrain's, say) whose parameter values, matched by name and
  // shape, replace the model's initial ones; "" for none. Relative paths as for `model`.
  std::string init_from;
  // Data: the split of the training set.
  std::string data_dir = "data/mnist";
  int64_t labeled = 0;         // 0: every example outside the validation set is labeled
  int64_t validation = 10000;  // held out of the training set; 0: none
  uint64_t split_seed = 1;
  // Rows of each step's batch: the first `batch_labeled` carry labels (the supervised
  // loss reads them), the next `batch_unlabeled` do not (only penalties read them).
  int64_t batch_labeled = 100;
  int64_t batch_unlabeled = 0;
  // SGD: η_t = learning_rate · min(1, t / warmup_epochs) · decay^t at (fractional) epoch t;
  // μ_t = momentum_start → momentum_end linearly over momentum_epochs.
  double learning_rate = 0.1;
  double warmup_epochs = 5;
  double decay = 0.998;
  double momentum_start = 0.5;
  double momentum_end = 0.99;
  double momentum_epochs = 500;
  std::string max_norm_rule = "unit-incoming";  // or input-outgoing-squared (optimizer.h)
  // Overrides the model's lambda stages when set.
  std::optional<std::vector<LambdaStage>> lambda_schedule;
  // Length: `epochs` of `steps_per_epoch` steps, or less when `budget_minutes` (> 0) runs out.
  int64_t epochs = 600;
  int64_t steps_per_epoch = 250;
  double budget_minutes = 0;
  uint64_t seed = 1;       // noise keys and batch order
  uint64_t init_seed = 1;  // parameter initialization, when the model file holds no values
  int threads = 2;
  double eval_every_epochs = 1;
  int64_t eval_batch = 1000;
  int64_t train_error_examples = 10000;  // labeled examples the train error is measured on
  double checkpoint_every_epochs = 10;
};

// Reads a config (docs/training.md). Unknown keys and bad values are Errors naming the
// field; `source` names the config in them.
TrainConfig parse_train_config(const nlohmann::json& j, const std::string& source);
nlohmann::json to_json(const TrainConfig& c);

struct TrainData {
  Dataset train;
  Dataset test;
};

// What a run reports while it goes.
struct TrainObserver {
  virtual ~TrainObserver() = default;
  // After every step (cheap: no evaluation), with the step's objective.
  virtual void on_step(int64_t /*step*/, int64_t /*total_steps*/, double /*epoch*/, double /*objective*/,
                       double /*elapsed_seconds*/) {}
  // After every evaluation, with the line written to metrics.jsonl.
  virtual void on_eval(const nlohmann::json& /*metrics*/) {}
  virtual void on_message(const std::string& /*text*/) {}
};

struct TrainSummary {
  nlohmann::json json;  // what summary.json holds
  bool diverged = false;
};

// Trains into `out_dir` (created if needed): metrics.jsonl, summary.json, checkpoint.pens,
// model.json (the last parameters) and best.model.json (those of the best validation
// error). Stops at NaN/Inf with a clear message in the summary and on the observer,
// leaving the last good checkpoint; errors in the inputs are thrown.
//
// With `resume`, starts from out_dir/checkpoint.pens (written by the same config, up to
// run.epochs, run.budget_minutes and run.threads) and continues exactly as an unbroken run
// would: batches and noise are functions of (seed, step). Evaluations logged after the
// checkpoint are dropped from metrics.jsonl and made again; the budget counts from the
// resumption.
TrainSummary train(const TrainConfig& config, const TrainData& data, const std::string& out_dir,
                   TrainObserver& observer, bool resume = false);

// Copies into `params` the values of the parameters of the model file at `path` that
// share a name (shapes must agree); returns a line naming what was copied. Throws when
// the file holds no values or shares no parameter.
std::string initialize_from(ParamStore<float>& params, const std::string& path);

// Counts [true class][predicted class] of the tape's output over a data set, a
// tape-batch at a time (the last batch padded with repeated rows, their predictions
// dropped). `x` is the tape's input for the examples.
std::vector<std::vector<int64_t>> confusion_matrix(Tape<float>& tape, const std::string& x, const std::string& output,
                                                   const Dataset& d);

}  // namespace pens
