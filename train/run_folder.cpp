#include "train/run_folder.h"

#include <filesystem>

#include "ops/ir/error.h"
#include "serialization/files.h"
#include "serialization/model_file.h"

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
                                const OptimizerState& optimizer) const {
  if (!all_finite(params.values())) return false;
  for (const StateBuffer& b : optimizer.buffers) {
    if (!all_finite(b.values)) return false;
  }
  pens::save_checkpoint(checkpoint_path(), state, params, optimizer);
  return true;
}

TrainingState RunFolder::load_checkpoint(ParamStore<float>& params, const OptimizerState& optimizer) const {
  if (!has_checkpoint()) fail(checkpoint_path(), ": no checkpoint to resume from");
  return pens::load_checkpoint(checkpoint_path(), params, optimizer);
}

}  // namespace pens
