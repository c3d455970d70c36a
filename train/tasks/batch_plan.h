// What each step of a dense training run reads and how it is scheduled, written once for
// the trainer and for a hand-written loop (the Python package's pens.TrainingPlan): the
// config's split of the training set, the shuffled sequences of labeled rows and of the
// unlabeled pool that the steps take their batches from, and the schedule's values at a
// step. A loop that takes its batches and settings from here, keys its noise
// {seed, optimizer step} and updates with the config's optimizer trains as pens train.
#pragma once
#include <cstdint>
#include <vector>

#include "pens/models/dataset.h"
#include "pens/serialization/model.h"
#include "pens/train/config/train_config.h"
#include "pens/train/optim/optimizer.h"
#include "pens/train/optim/schedule.h"

namespace pens {

// The semi-supervised split of the config (data.labeled of each class, data.validation
// held out), or with data.labeled = 0 every non-validation example labeled. Errors name
// the config's fields.
Split training_split(const TrainConfig& config, const Dataset& train_set);

// The schedule a run of `config` follows: the config's, with the λ stages of its
// lambda_schedule, or else of the model's pseudo-ensemble.
Schedule run_schedule(const TrainConfig& config, const Model& model);

class BatchPlan {
 public:
  BatchPlan(const TrainConfig& config, const Dataset& train_set);

  const Split& split() const { return split_; }
  // Every training example outside the validation set, the labeled ones included (their
  // labels unused), and with data.unlabeled_validation the validation images as well.
  const std::vector<int64_t>& pool() const { return pool_; }
  // Rows [first, first + n) of the endless shuffled sequence of labeled examples, and of
  // the pool: step s of batch B_l + B_u reads labeled rows [s B_l, (s + 1) B_l) and
  // unlabeled rows [s B_u, (s + 1) B_u).
  void labeled(int64_t first, int64_t n, std::vector<int64_t>& out) { labeled_.take(first, n, out); }
  void unlabeled(int64_t first, int64_t n, std::vector<int64_t>& out) { unlabeled_.take(first, n, out); }

 private:
  Split split_;
  std::vector<int64_t> pool_;
  Cycler labeled_, unlabeled_;
};

}  // namespace pens
