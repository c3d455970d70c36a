// The folder a training run writes, and reads back when it resumes:
//   config.json        the effective config
//   metrics.jsonl      one JSON object per evaluation
//   checkpoint.pens    parameters, optimizer state, step, seed, config, elapsed seconds (atomic)
//   checkpoint-S.pens  the checkpoints of steps S before it (as many as the config keeps):
//                      where a run that diverged rolls back to (Resume, --resume-from)
//   summary.json       how the run ended
//   *.model.json       model files (the last and the best parameters)
// Every file is written atomically or appended line by line, so a run killed at any
// moment leaves files that read back.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "pens/serialization/checkpoint.h"
#include "pens/serialization/model.h"

namespace pens {

// Where a run starts: afresh (the default), or from a checkpoint: the folder's own
// checkpoint.pens (`true`: pens train --resume), or another checkpoint file (--resume-from:
// a path, or one of the folder's checkpoint-STEP.pens), which becomes the folder's
// checkpoint.pens only once the resume is accepted.
struct Resume {
  bool on = false;
  std::string from;  // empty: the folder's checkpoint.pens

  Resume(bool resume = false) : on(resume) {}  // NOLINT(google-explicit-constructor): resume or not
  explicit Resume(std::string checkpoint) : on(true), from(std::move(checkpoint)) {}
};

// The fields of a config (JSON pointers into the form its to_json writes) that a resumed
// run may change: `free` ones silently (the description, the run's length, budget,
// patience and threads, how many checkpoints are kept), `schedule` ones reported as changes (the
// optimizer's schedule: what a user lowers to get past a divergence). The defaults are
// the sections pens train's configs share (train/config/config_reader.h).
struct ResumableFields {
  std::vector<std::string> free = {"/description", "/run/epochs", "/run/budget_minutes", "/run/patience_epochs",
                                   "/run/threads", "/checkpoint/keep"};
  std::vector<std::string> schedule = {"/optimizer/learning_rate",      "/optimizer/warmup_epochs",
                                       "/optimizer/decay",              "/optimizer/decay_start_epoch",
                                       "/optimizer/anneal_start_epoch",
                                       "/optimizer/anneal_end_epoch",   "/optimizer/momentum_start",
                                       "/optimizer/momentum_end",       "/optimizer/momentum_epochs"};
};

class RunFolder {
 public:
  // Creates the folder when needed. `keep_checkpoints` is how many of the latest
  // checkpoints stay on disk (1: checkpoint.pens alone). With `writes` false the folder is
  // only read: every write is skipped (the processes of a data-parallel run other than
  // process 0, which writes for all).
  explicit RunFolder(std::string dir, int64_t keep_checkpoints = 1, bool writes = true);

  const std::string& dir() const { return dir_; }
  // How many checkpoints stay on disk from now on (a run's config says, once read).
  void set_checkpoints_kept(int64_t keep) { keep_checkpoints_ = keep; }
  bool writes() const { return writes_; }
  std::string path(const std::string& name) const;

  void write_config(const nlohmann::json& config) const;
  void write_summary(const nlohmann::json& summary) const;
  void save_model(const Model& model, const std::string& name) const;

  // Starts metrics.jsonl: empty for a new run; for a run resumed at `resumed_step`, the
  // lines up to that step are kept (the resumed run makes the later ones again) and
  // returned.
  std::vector<nlohmann::json> start_metrics(int64_t resumed_step = -1);
  void append_metrics(const nlohmann::json& line);

  // The run's wall-clock seconds: those since this folder was opened, plus those the run
  // had trained before the checkpoint it resumed from (load_checkpoint reads them,
  // save_checkpoint records them), so budgets, minutes and examples per second are the
  // whole run's over all its invocations.
  double seconds() const;

  std::string checkpoint_path() const { return path("checkpoint.pens"); }
  // Saves unless a parameter or optimizer value is not finite (a good checkpoint is
  // never replaced by a bad one); says whether it saved. Keeps the checkpoint also as
  // checkpoint-STEP.pens (a second name of the same file) and removes those beyond
  // keep_checkpoints. The state's elapsed_seconds are this folder's seconds().
  bool save_checkpoint(const TrainingState& state, const ParamStore<float>& params, const OptimizerState& optimizer);
  // Loads the checkpoint `from` names (empty: checkpoint.pens); the folder is left as it
  // is until accept_resume.
  TrainingState load_checkpoint(ParamStore<float>& params, const OptimizerState& optimizer,
                                const std::string& from = "");
  // The checkpoint file load_checkpoint read.
  const std::string& loaded_from() const { return loaded_from_; }
  // The kept checkpoints, by step, oldest first.
  std::vector<std::pair<int64_t, std::string>> kept_checkpoints() const;
  // Throws, changing nothing in the folder, unless the loaded checkpoint's config
  // (`saved_config`) and the resumed run's (`config`), both in the form the config's
  // to_json writes, agree in all but the fields a resume may change (`resumable`); the
  // error names every other field that differs, with both values. Paths compare as absolute ones. Once
  // accepted, the loaded checkpoint becomes checkpoint.pens (atomically, where it was
  // another file), kept checkpoints of steps after it are removed (the trajectory a
  // roll-back abandons) and config.json becomes `config`. Returns "field was -> now" for
  // each schedule field that changed, and keeps them for resume_changes().
  std::vector<std::string> accept_resume(const nlohmann::json& saved_config, const nlohmann::json& config,
                                         const ResumableFields& resumable = {});
  // The schedule changes of the last accept_resume, for summary.json: {"step": the
  // checkpoint's step, "settings": {"optimizer.learning_rate": [was, now], ...}}; null when
  // nothing changed.
  const nlohmann::json& resume_changes() const { return resume_changes_; }
  // What a message about a diverged run adds: where the last good checkpoint is (saved or
  // resumed from by this folder), or that there is none.
  std::string checkpoint_note() const;

 private:
  std::string dir_;
  int64_t keep_checkpoints_;
  bool writes_;
  std::ofstream metrics_;
  int64_t last_checkpoint_step_ = -1;
  std::string loaded_from_;  // the checkpoint load_checkpoint read
  nlohmann::json resume_changes_;
  std::chrono::steady_clock::time_point opened_ = std::chrono::steady_clock::now();
  double earlier_seconds_ = 0;  // trained before the checkpoint resumed from
};

// The fields every summary.json starts with: status, steps, epochs, wall_seconds, the
// config and its hash.
nlohmann::json run_summary(bool diverged, int64_t steps, double epochs, double wall_seconds,
                           const nlohmann::json& config);

}  // namespace pens
