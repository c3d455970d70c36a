#include "pens/train/loop/run.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/serialization/files.h"
#include "pens/train/config/config_file.h"
#include "pens/train/loop/run_folder.h"

namespace pens {

namespace fs = std::filesystem;

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

PreparedRun prepare_run(const std::string& config_path, const RunOptions& options, std::optional<GivenData> given) {
  PreparedRun run;
  run.config_path = config_path;
  run.out_dir = options.out.value_or((fs::path("runs") / fs::path(config_path).stem()).string());
  const nlohmann::json j = read_config_file(config_path);
  run.kind = run_kind_of(j);
  if (run.kind == "skipgram") {
    fail(config_path, " is a word-vector pre-training config (task \"skipgram\"): run it with pens pretrain");
  }
  const RunKind* kind = RunKindRegistry::global().find(run.kind);
  if (!kind) fail(config_path, ": kind: ", RunKindRegistry::global().unknown(run.kind));
  run.resume = resume_of(options, run.out_dir);
  run.task = kind->prepare(config_path, j, options, std::move(given));
  run.description = cat("pens train: ", run.task->description(), "; writing ", run.out_dir);
  return run;
}

TrainSummary run_training(const PreparedRun& run, TrainObserver& observer, Communicator* communicator) {
  return run.task->train(run.out_dir, observer, run.resume, communicator);
}

}  // namespace pens
