#include "pens/train/run.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "pens/models/data_source.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/serialization/files.h"
#include "pens/serialization/json_text.h"
#include "pens/train/run_folder.h"
#include "pens/train/skipgram.h"

namespace pens {

namespace {
namespace fs = std::filesystem;

// The options every config takes, over the config's values. Paths are resolved by the one
// rule (run.h: a path written in the config from its folder, one on the command line from
// the working directory) and made absolute, so that the effective config (the run
// folder's config.json, the checkpoint's copy) names the same files from wherever it is
// read or resumed.
template <class Config>
void apply(const RunOptions& o, const std::string& config_path, const nlohmann::json& written, Config& config) {
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

// --resume needs the folder's checkpoint; --resume-from names one: a path, or a
// checkpoint kept in the output folder.
Resume resume_of(const RunOptions& o, const std::string& out_dir) {
  if (!o.resume_from) {
    const fs::path checkpoint = fs::path(out_dir) / "checkpoint.pens";
    if (o.resume && !fs::exists(checkpoint)) fail(checkpoint.string(), ": no checkpoint to resume from");
    return o.resume;
  }
  const fs::path in_folder = fs::path(out_dir) / *o.resume_from;
  const std::string from = !fs::exists(*o.resume_from) && fs::exists(in_folder) ? in_folder.string() : *o.resume_from;
  if (!fs::is_regular_file(from)) fail(from, ": no such checkpoint file");
  return Resume(from);
}

std::string budget_text(double minutes) { return minutes > 0 ? cat(" (budget ", minutes, " min)") : ""; }
}  // namespace

std::string relative_to_config(const std::string& config_path, const std::string& path) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  return absolute_path((fs::path(config_path).parent_path() / path).string());
}

std::string configured_data_dir(const std::string& config_path, const nlohmann::json& written,
                                const std::string& data_dir, const std::optional<std::string>& given) {
  if (given) return absolute_path(*given);
  const bool dir_written = written.contains("data") && written["data"].is_object() && written["data"].contains("dir");
  if (!dir_written) return absolute_path(data_dir);  // the default: a folder in the working directory
  const std::string resolved = relative_to_config(config_path, data_dir);
  // Until 2026-11-29 data.dir was read against the working directory. A config written
  // then names a folder that exists from there and not from the config's folder: say so,
  // rather than fail later on a missing file.
  if (!fs::path(data_dir).is_absolute() && !fs::exists(resolved) && fs::is_directory(data_dir)) {
    const fs::path config_folder = fs::path(absolute_path(config_path)).parent_path();
    fail(config_path, ": data.dir \"", data_dir, "\" is read from the config's folder, where there is no ", resolved,
         "; a folder of that name is in the working directory: write \"",
         fs::relative(absolute_path(data_dir), config_folder).string(), "\", an absolute path, or --data-dir");
  }
  return resolved;
}

PreparedRun prepare_run(const std::string& config_path, const RunOptions& options) {
  return prepare_run(config_path, options, std::nullopt);
}

PreparedRun prepare_run(const std::string& config_path, const RunOptions& options, std::optional<GivenData> given) {
  PreparedRun run;
  run.config_path = config_path;
  run.out_dir = options.out.value_or((fs::path("runs") / fs::path(config_path).stem()).string());
  const nlohmann::json j = read_json_file(config_path);
  if (is_skipgram_config(j)) {
    fail(config_path, " is a word-vector pre-training config (task \"skipgram\"): run it with pens pretrain");
  }
  run.trees = is_tree_config(j);
  if (run.trees && given) fail(config_path, " is a tree config: data given as arrays is for dense (MNIST-like) configs");
  if (run.trees) {
    if (options.labels) fail("labels is for MNIST configs; ", config_path, " is a tree config");
    if (options.split_seed) fail("split_seed is for MNIST configs; ", config_path, " is a tree config");
    if (options.shards) fail("shards is for MNIST configs; ", config_path, " is a tree config");
    run.tree = parse_tree_config(j, config_path);
    apply(options, config_path, j, run.tree);
    run.resume = resume_of(options, run.out_dir);
    run.tree_data = load_tree_data(run.tree.data_dir, run.tree.vocabulary);
    run.description = cat("pens train: ", run.tree.model, " on ", run.tree.data_dir, " (", run.tree.task, ") for ",
                          run.tree.epochs, " epochs", budget_text(run.budget_minutes()), ", ",
                          threads_text(run.tree.threads), "; writing ", run.out_dir);
    return run;
  }
  run.mnist = parse_train_config(j, config_path);
  apply(options, config_path, j, run.mnist);
  if (options.labels) {
    if (*options.labels < 0) fail("labels must be at least 0, got ", *options.labels);
    run.mnist.labeled = *options.labels;
  }
  if (options.split_seed) run.mnist.split_seed = *options.split_seed;
  if (options.shards) run.mnist.batch_shards = *options.shards;
  run.resume = resume_of(options, run.out_dir);
  if (given) {
    if (options.data_dir) fail("data_dir names a folder to read, but the data is given as arrays");
    run.mnist.data_dir = given->name;
    run.mnist_data = std::move(given->data);
  } else {
    run.mnist_data = load_data(run.mnist.data_source, run.mnist.data_dir, run.mnist.data_settings);
  }
  run.description = cat("pens train: ", run.mnist.model, " on ", run.mnist.data_dir, " for ", run.mnist.epochs,
                        " epochs of ", run.mnist.steps_per_epoch, " steps", budget_text(run.budget_minutes()), ", ",
                        threads_text(run.mnist.threads), "; writing ", run.out_dir);
  return run;
}

TrainSummary run_training(const PreparedRun& run, TrainObserver& observer, Communicator* communicator) {
  if (run.trees) return train_trees(run.tree, run.tree_data, run.out_dir, observer, run.resume, communicator);
  return train(run.mnist, run.mnist_data, run.out_dir, observer, run.resume, communicator);
}

}  // namespace pens
