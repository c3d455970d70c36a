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
  bool save_checkpoint(const TrainingState& state, const ParamStore<float>& params, const OptimizerState& optimizer) const;
  TrainingState load_checkpoint(ParamStore<float>& params, const OptimizerState& optimizer) const;

 private:
  std::string dir_;
  std::ofstream metrics_;
};

}  // namespace pens
