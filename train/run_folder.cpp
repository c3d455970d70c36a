#include "train/run_folder.h"

#include <filesystem>

#include "ops/ir/error.h"
#include "serialization/files.h"
#include "serialization/model_file.h"
#include "serialization/sha256.h"

namespace pens {

RunFolder::RunFolder(std::string dir) : dir_(std::move(dir)) { std::filesystem::create_directories(dir_); }

std::string RunFolder::path(const std::string& name) const { return (std::filesystem::path(dir_) / name).string(); }

void RunFolder::write_config(const nlohmann::json& config) const {
  write_file_atomically(path("config.json"), config.dump(2) + "\n");
}

void RunFolder::write_summary(const nlohmann::json& summary) const {
  write_file_atomically(path("summary.json"), summary.dump(2) + "\n");
}

void RunFolder::save_model(const Model& model, const std::string& name) const { pens::save_model(model, path(name)); }

std::vector<nlohmann::json> RunFolder::start_metrics(int64_t resumed_step) {
  std::vector<nlohmann::json> kept;
  std::string text;
  if (resumed_step >= 0) {
    std::ifstream in(path("metrics.jsonl"));
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json m = nlohmann::json::parse(line, nullptr, false);
      if (m.is_discarded() || !m.contains("step") || !m["step"].is_number() || m["step"].get<int64_t>() > resumed_step) {
        continue;
      }
      text += line + "\n";
      kept.push_back(m);
    }
  }
  write_file_atomically(path("metrics.jsonl"), text);
  metrics_ = std::ofstream(path("metrics.jsonl"), std::ios::app);
  if (!metrics_) fail(path("metrics.jsonl"), ": cannot write");
  return kept;
}

void RunFolder::append_metrics(const nlohmann::json& line) {
  metrics_ << line.dump() << "\n" << std::flush;
  if (!metrics_) fail(path("metrics.jsonl"), ": cannot write");
}

bool RunFolder::has_checkpoint() const { return std::filesystem::exists(checkpoint_path()); }

bool RunFolder::save_checkpoint(const TrainingState& state, const ParamStore<float>& params,
                                const OptimizerState& optimizer) {
  if (!all_finite(params.values())) return false;
  for (const StateBuffer& b : optimizer.buffers) {
    if (!all_finite(b.values)) return false;
  }
  pens::save_checkpoint(checkpoint_path(), state, params, optimizer);
  last_checkpoint_step_ = state.step;
  return true;
}

TrainingState RunFolder::load_checkpoint(ParamStore<float>& params, const OptimizerState& optimizer) {
  if (!has_checkpoint()) fail(checkpoint_path(), ": no checkpoint to resume from");
  remove_interrupted_writes(dir_);  // what a killed run's last write left behind
  TrainingState state = pens::load_checkpoint(checkpoint_path(), params, optimizer);
  last_checkpoint_step_ = state.step;
  return state;
}

void RunFolder::check_resumable(const nlohmann::json& saved, const nlohmann::json& now) const {
  const auto resumable = [](nlohmann::json c) {
    for (const char* key : {"epochs", "budget_minutes", "threads"}) c["run"].erase(key);
    return c;
  };
  if (resumable(saved) != resumable(now)) {
    fail(checkpoint_path(), ": written by a different config (only run.epochs, run.budget_minutes and "
         "run.threads may change on resume); saved: ", saved.dump());
  }
}

std::string RunFolder::checkpoint_note() const {
  if (last_checkpoint_step_ < 0) return "; no checkpoint was written before it";
  return cat("; the last good checkpoint is ", checkpoint_path(), " (step ", last_checkpoint_step_, ")");
}

nlohmann::json run_summary(bool diverged, int64_t steps, double epochs, double wall_seconds,
                           const nlohmann::json& config) {
  return {{"status", diverged ? "diverged" : "finished"},
          {"steps", steps},
          {"epochs", epochs},
          {"wall_seconds", wall_seconds},
          {"config_hash", sha256_hex(config.dump()).substr(0, 16)},
          {"config", config}};
}

}  // namespace pens
