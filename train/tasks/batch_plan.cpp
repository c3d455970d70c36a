#include "pens/train/tasks/batch_plan.h"

#include <cmath>

#include "pens/ops/ir/error.h"

namespace pens {

Split training_split(const TrainConfig& config, const Dataset& train_set) {
  if (config.labeled > 0) {
    try {
      return semi_supervised_split(train_set, config.labeled, config.validation, config.split_seed);
    } catch (const Error& e) {
      fail(config.source.empty() ? "" : config.source + ": ", "data.labeled = ", config.labeled,
           ", data.validation = ", config.validation, ": ", e.what());
    }
  }
  const int64_t with_labels = labeled_examples(train_set);
  if (config.validation >= with_labels) {
    fail(config.source.empty() ? "" : config.source + ": ", "data.validation = ", config.validation,
         " leaves none of the ", with_labels, " training examples with labels");
  }
  // The first data.validation examples with a label are held out, the others with one are
  // labeled, those without one unlabeled.
  const std::vector<int64_t> order = permutation(train_set.size, config.split_seed, 1);
  Split split;
  for (const int64_t row : order) {
    if (train_set.y[static_cast<size_t>(row)] < 0) {
      split.unlabeled.push_back(row);
    } else {
      (static_cast<int64_t>(split.validation.size()) < config.validation ? split.validation : split.labeled)
          .push_back(row);
    }
  }
  return split;
}

Schedule run_schedule(const TrainConfig& config, const Model& model) {
  Schedule schedule = config.schedule;
  if (model.ensemble) schedule.lambda_stages = config.lambda_schedule.value_or(model.ensemble->lambda_schedule);
  return schedule;
}

namespace {
std::vector<int64_t> pool_of(const Split& split, bool with_validation) {
  std::vector<int64_t> pool = split.unlabeled;
  pool.insert(pool.end(), split.labeled.begin(), split.labeled.end());
  if (with_validation) pool.insert(pool.end(), split.validation.begin(), split.validation.end());
  return pool;
}
}  // namespace

// Pass p of each cycler shuffles with stream base + p: the two bases keep their streams
// apart (and apart from the split's stream 1) for any realistic run.
BatchPlan::BatchPlan(const TrainConfig& config, const Dataset& train_set)
    : split_(training_split(config, train_set)),
      pool_(pool_of(split_, config.unlabeled_validation)),
      labeled_(split_.labeled, config.seed, 1000),
      unlabeled_(pool_, config.seed, uint64_t{1} << 30) {}

}  // namespace pens
