#include "pens/train/loop/run_folder.h"

#include <algorithm>
#include <array>
#include <filesystem>

#include "pens/ops/ir/error.h"
#include "pens/serialization/files.h"
#include "pens/serialization/json_text.h"
#include "pens/serialization/model_file.h"
#include "pens/serialization/sha256.h"

namespace pens {

RunFolder::RunFolder(std::string dir, int64_t keep_checkpoints, bool writes)
    : dir_(std::move(dir)), keep_checkpoints_(keep_checkpoints), writes_(writes) {
  if (writes_) std::filesystem::create_directories(dir_);
}

std::string RunFolder::path(const std::string& name) const { return (std::filesystem::path(dir_) / name).string(); }

void RunFolder::write_config(const nlohmann::json& config) const {
  if (!writes_) return;
  write_file_atomically(path("config.json"), format_json(config) + "\n");
}

void RunFolder::write_summary(const nlohmann::json& summary) const {
  if (!writes_) return;
  write_file_atomically(path("summary.json"), format_json(summary) + "\n");
}

void RunFolder::save_model(const Model& model, const std::string& name) const {
  if (writes_) pens::save_model(model, path(name));
}

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
  if (!writes_) return kept;
  write_file_atomically(path("metrics.jsonl"), text);
  metrics_ = std::ofstream(path("metrics.jsonl"), std::ios::app);
  if (!metrics_) fail(path("metrics.jsonl"), ": cannot write");
  return kept;
}

void RunFolder::append_metrics(const nlohmann::json& line) {
  if (!writes_) return;
  metrics_ << line.dump() << "\n" << std::flush;
  if (!metrics_) fail(path("metrics.jsonl"), ": cannot write");
}

double RunFolder::seconds() const {
  return earlier_seconds_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - opened_).count();
}

bool RunFolder::save_checkpoint(const TrainingState& state, const ParamStore<float>& params,
                                const OptimizerState& optimizer) {
  if (!all_finite(params.values())) return false;
  for (const StateBuffer& b : optimizer.buffers) {
    if (!all_finite(b.values)) return false;
  }
  last_checkpoint_step_ = state.step;
  if (!writes_) return true;
  TrainingState timed = state;
  timed.elapsed_seconds = seconds();
  pens::save_checkpoint(checkpoint_path(), timed, params, optimizer);
  // With keep 1 the latest is checkpoint.pens alone, and kept ones from a run that kept
  // more are removed.
  const size_t keep = keep_checkpoints_ > 1 ? static_cast<size_t>(keep_checkpoints_) : 0;
  if (keep > 0) link_atomically(checkpoint_path(), path(cat("checkpoint-", state.step, ".pens")));
  const auto kept = kept_checkpoints();
  std::error_code ignored;  // one left behind is removed by the next checkpoint
  for (size_t i = 0; i + keep < kept.size(); ++i) std::filesystem::remove(kept[i].second, ignored);
  return true;
}

std::vector<std::pair<int64_t, std::string>> RunFolder::kept_checkpoints() const {
  std::vector<std::pair<int64_t, std::string>> kept;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, error)) {
    const std::string name = entry.path().filename().string();
    constexpr std::string_view kPrefix = "checkpoint-", kSuffix = ".pens";
    if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) || !name.ends_with(kSuffix)) continue;
    const std::string digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
    if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    kept.emplace_back(std::stoll(digits), entry.path().string());
  }
  std::sort(kept.begin(), kept.end());
  return kept;
}

TrainingState RunFolder::load_checkpoint(ParamStore<float>& params, const OptimizerState& optimizer,
                                         const std::string& from) {
  loaded_from_ = from.empty() ? checkpoint_path() : from;
  if (!std::filesystem::is_regular_file(loaded_from_)) {
    fail(loaded_from_, from.empty() ? ": no checkpoint to resume from" : ": no such checkpoint file");
  }
  if (writes_) remove_interrupted_writes(dir_);  // what a killed run's last write left behind
  TrainingState state = pens::load_checkpoint(loaded_from_, params, optimizer);
  last_checkpoint_step_ = state.step;
  earlier_seconds_ = state.elapsed_seconds;
  return state;
}

namespace {

// The config fields that name files or folders, made absolute for comparison: a run
// started before configs were stored with absolute paths holds them relative to the
// folder it was started from, taken to be this one.
nlohmann::json with_absolute_paths(nlohmann::json c) {
  for (const char* field : {"/model", "/init_from", "/word_vectors", "/data/dir"}) {
    const nlohmann::json::json_pointer at(field);
    if (!c.contains(at) || !c[at].is_string()) continue;
    c[at] = absolute_path(c[at].get<std::string>());
  }
  return c;
}

}  // namespace

std::vector<std::string> RunFolder::accept_resume(const nlohmann::json& saved_config, const nlohmann::json& config,
                                                 const ResumableFields& resumable) {
  using Pointer = nlohmann::json::json_pointer;
  const nlohmann::json saved = with_absolute_paths(saved_config), now = with_absolute_paths(config);
  // "optimizer.learning_rate": a field as messages name it.
  const auto dotted = [](const std::string& pointer) {
    std::string name = pointer.substr(1);
    std::replace(name.begin(), name.end(), '/', '.');
    return name;
  };
  const auto fixed = [&](nlohmann::json c) {
    for (const std::vector<std::string>* fields : {&resumable.free, &resumable.schedule}) {
      for (const std::string& field : *fields) {
        const Pointer at(field);
        if (c.contains(at)) c[at.parent_pointer()].erase(at.back());
      }
    }
    return c;
  };
  const nlohmann::json fixed_saved = fixed(saved), fixed_now = fixed(now);
  if (fixed_saved != fixed_now) {
    // Each field that differs, by its dotted name, with both values: what a user must put back.
    std::string fields;
    for (const nlohmann::json& op : nlohmann::json::diff(fixed_saved, fixed_now)) {
      const std::string path = op["path"].get<std::string>();
      const nlohmann::json::json_pointer at(path);
      const std::string name = dotted(path);
      const std::string before = fixed_saved.contains(at) ? fixed_saved[at].dump() : "absent";
      const std::string after = fixed_now.contains(at) ? fixed_now[at].dump() : "absent";
      fields += cat(fields.empty() ? "" : "; ", name, " ", before, " in the checkpoint, ", after, " now");
    }
    std::string allowed;
    for (const std::string& field : resumable.free) allowed += cat(allowed.empty() ? "" : ", ", dotted(field));
    if (!resumable.schedule.empty()) allowed += " and the optimizer's schedule: ";
    for (const std::string& field : resumable.schedule) {
      // The field's own name: "learning_rate" for /optimizer/learning_rate.
      allowed += cat(field.substr(field.rfind('/') + 1), &field == &resumable.schedule.back() ? "" : ", ");
    }
    fail(loaded_from_, ": written by a different config: ", fields, " (a resume may change only ", allowed, ")");
  }
  std::vector<std::string> changed;
  nlohmann::json settings = nlohmann::json::object();
  for (const std::string& field : resumable.schedule) {
    const Pointer at(field);
    const nlohmann::json was = saved.contains(at) ? saved[at] : nlohmann::json();
    const nlohmann::json is = now.contains(at) ? now[at] : nlohmann::json();
    if (was == is) continue;
    changed.push_back(cat(dotted(field), " ", was.dump(), " -> ", is.dump()));
    settings[dotted(field)] = {was, is};
  }
  resume_changes_ = changed.empty() ? nlohmann::json() : nlohmann::json{{"step", last_checkpoint_step_}, {"settings", settings}};
  // Accepted: the folder becomes the resumed run's. The loaded checkpoint is its
  // checkpoint.pens, kept checkpoints of later steps (a trajectory a roll-back abandons)
  // go, and config.json is the resumed run's.
  if (writes_) {
    const bool own = loaded_from_.empty() || (std::filesystem::exists(checkpoint_path()) &&
                                              std::filesystem::equivalent(loaded_from_, checkpoint_path()));
    if (!own) link_atomically(loaded_from_, checkpoint_path());
    std::error_code ignored;
    for (const auto& [step, file] : kept_checkpoints()) {
      if (step > last_checkpoint_step_) std::filesystem::remove(file, ignored);
    }
  }
  write_config(config);
  return changed;
}

std::string RunFolder::checkpoint_note() const {
  if (last_checkpoint_step_ < 0) return "; no checkpoint was written before it";
  std::string earlier;
  for (const auto& [step, file] : kept_checkpoints()) {
    if (step < last_checkpoint_step_) earlier = cat(std::filesystem::path(file).filename().string(), earlier.empty() ? "" : ", ", earlier);
  }
  return cat("; the last good checkpoint is ", checkpoint_path(), " (step ", last_checkpoint_step_, ")",
             earlier.empty() ? "" : cat("; earlier ones: ", earlier, " (its parameters may already be on their way to "
                                        "the divergence: pens train --resume-from FILE rolls back to an earlier one)"));
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
