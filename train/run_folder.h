// The folder a training run writes, and reads back when it resumes:
//   config.json        the effective config
//   metrics.jsonl      one JSON object per evaluation
//   checkpoint.pens    parameters, optimizer state, step, seed, config (atomic)
//   summary.json       how the run ended
//   *.model.json       model files (the last and the best parameters)
// Every file is written atomically or appended line by line, so a run killed at any
// moment leaves files that read back.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serialization/checkpoint.h"
#include "serialization/model.h"

namespace pens {

class RunFolder {
 public:
  // Creates the folder when needed.
  explicit RunFolder(std::string dir);

  const std::string& dir() const { return dir_; }
  std::string path(const std::string& name) const;

  void write_config(const nlohmann::json& config) const;
  void write_summary(const nlohmann::json& summary) const;
  void save_model(const Model& model, const std::string& name) const;

  // Starts metrics.jsonl: empty for a new run; for a run resumed at `resumed_step`, the
  // lines up to that step are kept (the resumed run makes the later ones again) and
  // returned.
  std::vector<nlohmann::json> start_metrics(int64_t resumed_step = -1);
  void append_metrics(const nlohmann::json& line);

  std::string checkpoint_path() const { return path("checkpoint.pens"); }
  bool has_checkpoint() const;
  // Saves unless a parameter or optimizer value is not finite (a good checkpoint is
  // never replaced by a bad one); says whether it saved.
  bool save_checkpoint(const TrainingState& state, const ParamStore<float>& params, const OptimizerState& optimizer);
  TrainingState load_checkpoint(ParamStore<float>& params, const OptimizerState& optimizer);
  // Throws unless a checkpoint's config (`saved`) and a resumed run's (`now`), both in
  // the form the config's to_json writes, agree in all but run.epochs,
  // run.budget_minutes and run.threads.
  void check_resumable(const nlohmann::json& saved, const nlohmann::json& now) const;
  // What a message about a diverged run adds: where the last good checkpoint is (saved or
  // resumed from by this folder), or that there is none.
  std::string checkpoint_note() const;

 private:
  std::string dir_;
  std::ofstream metrics_;
  int64_t last_checkpoint_step_ = -1;
};

// The fields every summary.json starts with: status, steps, epochs, wall_seconds, the
// config and its hash.
nlohmann::json run_summary(bool diverged, int64_t steps, double epochs, double wall_seconds,
                           const nlohmann::json& config);

}  // namespace pens
