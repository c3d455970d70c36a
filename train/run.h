// A training run as `pens train` starts it, for the CLI and the Python package alike: a
// config file (MNIST or sentiment trees: the config says which), the options that override
// it, the data loaded and the output folder chosen, then the run itself.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "pens/train/observer.h"
#include "pens/train/trainer.h"
#include "pens/train/tree_trainer.h"

namespace pens {

// What overrides the config; unset: the config's value. Checked by prepare_run.
struct RunOptions {
  std::optional<std::string> out;          // default runs/<config's stem>
  std::optional<std::string> init;         // a model file whose values start the run
  std::optional<std::string> data_dir;
  std::optional<uint64_t> seed;
  std::optional<int64_t> epochs;
  std::optional<double> budget_minutes;    // 0: none
  std::optional<int> threads;              // 0: every CPU this process may use
  std::optional<int> max_threads;          // caps the threads (a data-parallel process: its CPUs)
  std::optional<int64_t> labels;           // MNIST: labeled examples
  std::optional<uint64_t> split_seed;      // MNIST: which examples are labeled
  std::optional<int64_t> shards;           // MNIST: batch.shards
  bool resume = false;                     // from the output folder's checkpoint
  // Resume from this checkpoint: a path, or the name of one kept in the output folder.
  std::optional<std::string> resume_from;
};

struct PreparedRun {
  std::string config_path;
  std::string out_dir;
  Resume resume;  // --resume, --resume-from
  bool trees = false;       // which of the two below is set
  TrainConfig mnist;
  TrainData mnist_data;
  TreeConfig tree;
  TreeData tree_data;
  std::string description;  // "pens train: MODEL on DATA for N epochs ...; writing OUT"

  double budget_minutes() const { return trees ? tree.budget_minutes : mnist.budget_minutes; }
};

// Reads and checks the config and the options and loads the data; throws an Error naming
// what is wrong before anything trains or is written. The trainer writes the output folder
// (config.json at the start, or once a resume is accepted).
PreparedRun prepare_run(const std::string& config_path, const RunOptions& options = {});

// Data given by the caller (the Python package's NumPy arrays) in place of the files
// data.dir names; `name` stands for it where the run names its data (config.json's
// data.dir, messages).
struct GivenData {
  TrainData data;
  std::string name;
};
// prepare_run on given data: a dense (MNIST-like) config; a tree config is refused.
PreparedRun prepare_run(const std::string& config_path, const RunOptions& options, std::optional<GivenData> given);

// Trains (or resumes) a prepared run, reporting to `observer`; data-parallel over
// `communicator`'s processes when it has more than one (MNIST configs; train()).
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

}  // namespace pens
