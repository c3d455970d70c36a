// A training run as `pens train` starts it, for the CLI and the Python package alike: a
// config file (its kind of run says how it is read: train/loop/run_kind.h), the options that
// override it, the data loaded and the output folder chosen, then the run itself.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/serialization/files.h"
#include "pens/train/loop/observer.h"
#include "pens/train/loop/run_kind.h"

namespace pens {

struct PreparedRun {
  std::string config_path;
  std::string out_dir;
  Resume resume;  // --resume, --resume-from
  std::string kind;  // its RunKind's name
  std::shared_ptr<const PreparedTask> task;
  std::string description;  // "pens train: MODEL on DATA for N epochs ...; writing OUT"

  double budget_minutes() const { return task->budget_minutes(); }
  // The task as its kind's own type (PreparedClassifier, PreparedTrees); an Error when the
  // run is of another kind.
  template <class Prepared>
  const Prepared& task_as() const {
    const auto* t = dynamic_cast<const Prepared*>(task.get());
    if (!t) fail(config_path, ": a ", kind, " config");
    return *t;
  }
};

// Reads and checks the config and the options and loads the data (or takes `given`, for
// the kinds that take arrays); throws an Error naming what is wrong before anything trains
// or is written. The trainer writes the output folder (config.json at the start, or once
// a resume is accepted).
PreparedRun prepare_run(const std::string& config_path, const RunOptions& options = {},
                        std::optional<GivenData> given = std::nullopt);

// Where a run with `options` starts in `out_dir`: --resume needs the folder's checkpoint;
// --resume-from names one (a path, or a checkpoint kept in the folder). An Error when it
// is missing.
Resume resume_of(const RunOptions& options, const std::string& out_dir);

// Trains (or resumes) a prepared run, reporting to `observer`; data-parallel over
// `communicator`'s processes when it has more than one.
TrainSummary run_training(const PreparedRun& run, TrainObserver& observer, Communicator* communicator = nullptr);

// The one rule for paths: a path written in a config file is relative to the config's
// folder; one on the command line, or a default the config leaves out (data/mnist,
// ../shared/data/sst), is relative to the working directory. Both functions return
// absolute paths ("" stays "").

// A path written in a config (model, init_from).
std::string relative_to_config(const std::string& config_path, const std::string& path);

// The run's data folder: `given` on the command line (from the working directory), else the
// config's; `written` is the config's JSON, which says whether data.dir was written
// (relative to the config) or left to its default (the working directory).
std::string configured_data_dir(const std::string& config_path, const nlohmann::json& written,
                                const std::string& data_dir, const std::optional<std::string>& given = std::nullopt);

// The options every kind of config takes, over its values (a Config with model,
// data_dir, init_from, seed, epochs, budget_minutes and threads). Paths are resolved by
// the one rule above and made absolute, so that the effective config (the run folder's
// config.json, the checkpoint's copy) names the same files from wherever it is read or
// resumed.
template <class Config>
void apply_run_options(const RunOptions& o, const std::string& config_path, const nlohmann::json& written,
                       Config& config) {
  config.model = relative_to_config(config_path, config.model);
  config.data_dir = configured_data_dir(config_path, written, config.data_dir, o.data_dir);
  config.init_from = relative_to_config(config_path, config.init_from);
  if (o.init) config.init_from = absolute_path(*o.init);
  if (o.seed) config.seed = *o.seed;
  if (o.epochs) {
    if (*o.epochs < 1) fail("epochs must be at least 1, got ", *o.epochs);
    config.epochs = *o.epochs;
  }
  if (o.budget_minutes) {
    if (!(*o.budget_minutes >= 0) || !std::isfinite(*o.budget_minutes)) {
      fail("budget_minutes must be a finite number of minutes, at least 0, got ", *o.budget_minutes);
    }
    config.budget_minutes = *o.budget_minutes;
  }
  if (o.threads) {
    if (*o.threads < 0) fail("threads must be at least 0 (0: every CPU), got ", *o.threads);
    config.threads = *o.threads;
  }
  if (o.max_threads) config.threads = std::min(resolve_threads(config.threads), *o.max_threads);
}

// " (budget M min)", or "" without a budget: for a run's description.
std::string budget_text(double minutes);

}  // namespace pens
