// Training a model file's pseudo-ensemble on a classification data set: the
// semi-supervised protocol (class-balanced labeled set, validation set, the rest
// unlabeled), the optimizer and schedules of the config, evaluation of the clean parent,
// checkpoints, and a run folder a researcher can read (train/loop/run_folder.h).
#pragma once

#include <string>

#include "pens/autodiff/param_store.h"
#include "pens/models/data_source.h"
#include "pens/train/config/train_config.h"
#include "pens/train/dist/communicator.h"
#include "pens/train/loop/observer.h"
#include "pens/train/loop/run_folder.h"
#include "pens/train/loop/run_kind.h"

namespace pens {

// Trains into `out_dir`: config.json, metrics.jsonl, summary.json, checkpoint.pens,
// model.json (the last parameters), best.model.json (those of the best validation
// error), learning-curve.png, filters.png. Stops at NaN/Inf with a clear message in the
// summary and on the observer, leaving the last good checkpoint; errors in the inputs are
// thrown.
//
// With `resume`, starts from out_dir/checkpoint.pens or the checkpoint it names (written by
// the same config, up to run.epochs, run.budget_minutes, run.threads and the optimizer's
// schedule; another is refused, the folder unchanged) and continues exactly as an
// unbroken run would: batches and noise are functions of (seed, step). Evaluations logged
// after the checkpoint are dropped from metrics.jsonl and made again; the budget counts
// from the resumption.
//
// With a `communicator` of more than one process the run is data-parallel: each process
// calls train() with the same config and data; each computes its share of every batch and
// of every evaluation, and process 0 alone writes out_dir (docs/distributed.md). An error
// in one process's step is thrown on all as a CollectiveError.
TrainSummary train(const TrainConfig& config, const TrainData& data, const std::string& out_dir,
                   TrainObserver& observer, const Resume& resume = {}, Communicator* communicator = nullptr);

// Copies into `params` the values of the parameters of the model file at `path` that
// share a name (shapes must agree); returns a line naming what was copied. Throws when
// the file holds no values or shares no parameter. The moving averages of `graph`'s
// parameters that the file does not hold (a mean teacher's) restart at their sources'
// new values, so a teacher starts from the loaded student, not from the random one.
std::string initialize_from(ParamStore<float>& params, const Graph& graph, const std::string& path);

// Gives `model` the values a run starts from: drawn from the init attributes with
// `init_seed` (a config's run.init_seed) when the file holds none, then the values of the
// model file `init_from` (when not empty) copied in. Returns initialize_from's line, ""
// without init_from.
std::string start_values(Model& model, uint64_t init_seed, const std::string& init_from);

// A classifier run as pens train prepares it (the "classifier" kind of run,
// train/loop/run_kind.h): its config with the options applied, and its data. The Python
// package's TrainingPlan reads both.
struct PreparedClassifier : PreparedTask {
  TrainConfig config;
  TrainData data;

  double budget_minutes() const override { return config.budget_minutes; }
  std::string description() const override;
  TrainSummary train(const std::string& out_dir, TrainObserver& observer, const Resume& resume,
                     Communicator* communicator) const override;
  std::string evaluation_line(const nlohmann::json& metrics) const override;
  std::vector<std::string> results(const nlohmann::json& summary) const override;
};

}  // namespace pens
