// The one training loop every kind of run goes through. What a run does at each stage is
// its task's (a classifier on a dense data set, a tree model on a treebank, ...): the task
// builds its model, trains one step, evaluates; the loop owns what every run shares and
// what must not drift between kinds of run:
//
//   the run folder (config.json, metrics.jsonl, checkpoints, summary.json, model files),
//   resuming from a checkpoint (the resume check, the metrics kept, the clock),
//   the wall-clock budget, stopping at a divergence with the last good checkpoint kept,
//   the evaluation and checkpoint cadence, the best model by validation error,
//   the end (a last evaluation, model.json, the summary, the pictures),
//   and a data-parallel run's agreement (one clock decides the budget; the parameters'
//   fingerprints are compared at every checkpoint; process 0 alone writes).
//
// A new kind of run is a RunTask; train/tasks/ holds those written so far: a classifier
// (trainer.cpp), a tree model (tree_trainer.cpp), skip-gram word vectors (skipgram.cpp)
// and greedy denoising-autoencoder pre-training (pretrain.cpp, a stage per layer).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "pens/serialization/model.h"
#include "pens/train/dist/communicator.h"
#include "pens/train/loop/observer.h"
#include "pens/train/loop/run_folder.h"
#include "pens/train/loop/step.h"
#include "pens/train/optim/optimizer.h"

namespace pens {

// The length and cadence of a run, in steps.
struct RunLength {
  int64_t steps_per_epoch = 1;
  int64_t epochs = 1;
  int64_t eval_every = 1;        // steps between evaluations (and one at the end)
  int64_t checkpoint_every = 1;  // steps between checkpoints (and one at the end)
  double budget_minutes = 0;     // > 0: the run stops at the first step past it
  // > 0: the run ends after an evaluation that finds its best one (by validation error)
  // this many epochs or more behind it; it then finishes as a run that reached its length
  // does, and its summary says so ("stopped_early").
  double patience_epochs = 0;
  int64_t checkpoint_keep = 1;   // checkpoints kept on disk, the latest included
  uint64_t seed = 0;             // recorded in checkpoints
  // Whether evaluations choose a best model (best.model.json, by validation error); false
  // for a run that has nothing to choose by.
  bool keeps_best = true;
};

// Steps in `epochs` of `steps_per_epoch` steps, at least one.
int64_t steps_in(double epochs, int64_t steps_per_epoch);

// The length of a run of `config` (a config with the run and checkpoint sections every
// kind shares, train/config/config_reader.h) in steps of `steps_per_epoch`, evaluated
// every `eval_every` steps.
template <class Config>
RunLength run_length_of(const Config& config, int64_t steps_per_epoch, int64_t eval_every) {
  RunLength length{.steps_per_epoch = steps_per_epoch,
                   .epochs = config.epochs,
                   .eval_every = eval_every,
                   .checkpoint_every = steps_in(config.checkpoint_every_epochs, steps_per_epoch),
                   .budget_minutes = config.budget_minutes,
                   .checkpoint_keep = config.checkpoint_keep,
                   .seed = config.seed};
  if constexpr (requires { config.patience_epochs; }) length.patience_epochs = config.patience_epochs;
  return length;
}

// The training since the last evaluation.
struct TrainingWindow {
  double objective = 0;  // the steps' mean objective
  int64_t steps = 0;
  double seconds = 0;    // the steps' wall-clock seconds
};

class RunTask {
 public:
  virtual ~RunTask() = default;

  virtual RunLength length() const = 0;
  // The run's config as config.json and the checkpoints hold it.
  virtual nlohmann::json config() const = 0;
  // A config in that form (a checkpoint's, or this run's) read back as this pens reads
  // configs, so that fields an earlier pens or a caller left unset take today's defaults:
  // what the resume check compares. `where` names it in errors.
  virtual nlohmann::json as_read(const nlohmann::json& config, const std::string& where) const = 0;
  // The fields of the config a resumed run may change (by default those of the sections
  // every training config shares).
  virtual ResumableFields resumable() const { return {}; }

  // The model whose parameters train (saved as model.json and best.model.json) and the
  // optimizer whose state the checkpoints keep.
  virtual Model& model() = 0;
  virtual Optimizer& optimizer() = 0;
  // What model.json holds at the end: the model, or a form of it for its users (skip-gram's
  // vectors scaled); checkpoints keep model()'s values.
  virtual const Model& saved_model() { return model(); }

  // Trains step `step` (counted from 0 over the whole run).
  virtual StepResult step(int64_t step) = 0;
  // A task whose run is a sequence of stages (pre-training's layers, one after another)
  // begins one at `step` when this returns a metrics line (its starting point, recorded
  // as an evaluation is), and returns null elsewhere. The loop asks at step 0 of a fresh
  // run and after each evaluation (so a stage starts where one falls), before that step's
  // checkpoint, so that a resumed run is either before a stage's start or past it with
  // its line kept.
  virtual nlohmann::json begin_stage(int64_t /*step*/) { return nullptr; }
  // On a resume, each evaluation line the run keeps from before its checkpoint, in order
  // (for a task whose summary draws on every evaluation, not the last and the best alone).
  virtual void recall(const nlohmann::json& /*metrics*/) {}
  // Before the loop reads model() and optimizer() for a checkpoint (the end's included):
  // a task that trains on stores of its own (pre-training's, a layer at a time) brings
  // them up to date there.
  virtual void gather_state() {}
  // The line of metrics.jsonl for an evaluation after `done` steps. It must hold
  // "validation_error" (a number, or null without a validation set): the run keeps the
  // parameters of its lowest one as best.model.json (without one, the latest). The loop
  // adds "elapsed_seconds".
  virtual nlohmann::json evaluate(int64_t done, const TrainingWindow& window) = 0;
  // Once training ended without a divergence, before the run's clock stops (what it does
  // counts in the run's minutes); best.model.json is then in `folder`.
  virtual void finishing(const RunFolder& /*folder*/, const nlohmann::json& /*best*/) {}
  // Adds the task's fields to summary.json, given the last and the best evaluation (null
  // when there was none).
  virtual void summarize(nlohmann::json& summary, const nlohmann::json& last, const nlohmann::json& best) const = 0;
};

// Runs `task` into `out_dir` from the start or, with `resume`, from a checkpoint (which
// must have been written by the same config, up to the fields RunFolder::accept_resume
// lets change), and returns the summary. With a communicator of P > 1 processes every
// process calls this with its own task over the same config, which computes its share of
// each step and evaluation; process 0 writes the folder; an error in setting up on one
// process is thrown on all. `make_task` builds the task (on every process, together).
template <class MakeTask>
TrainSummary run_task(MakeTask make_task, const std::string& out_dir, TrainObserver& observer, const Resume& resume,
                      Communicator* communicator);

class RunLoop {
 public:
  // Trains `task` into `folder` (whose checkpoints kept become the task's).
  RunLoop(RunTask& task, RunFolder& folder, TrainObserver& observer, Communicator* communicator);
  // Begins the run folder, or resumes from the checkpoint `resume` names.
  void start(const Resume& resume);
  // Trains until the run's length, its budget or a divergence ends it.
  void run();
  // Evaluates and saves (unless the run diverged) and writes the summary.
  TrainSummary finish();

 private:
  double epoch_of(int64_t step) const;
  bool out_of_budget() const;
  bool out_of_patience(int64_t done);
  void evaluate(int64_t done);
  void begin_stage(int64_t step);
  bool checkpoint(int64_t done);
  void note(const nlohmann::json& metrics);  // keeps the last and the best evaluation

  RunTask& task_;
  RunLength length_;
  Communicator* comm_;  // null: one process
  RunFolder& folder_;
  TrainObserver& observer_;
  int64_t step_ = 0, total_steps_ = 0;
  double objective_sum_ = 0, window_start_ = 0;
  int64_t window_steps_ = 0;
  double best_error_;
  nlohmann::json best_ = nullptr, last_ = nullptr;
  std::string diverged_;
  nlohmann::json stopped_early_ = nullptr;  // set by out_of_patience
};

template <class MakeTask>
TrainSummary run_task(MakeTask make_task, const std::string& out_dir, TrainObserver& observer, const Resume& resume,
                      Communicator* communicator) {
  Communicator* comm = communicator && communicator->size() > 1 ? communicator : nullptr;
  std::unique_ptr<RunTask> task;
  std::unique_ptr<RunFolder> folder;
  std::unique_ptr<RunLoop> loop;
  const auto set_up = [&] {
    // The folder first: an output path that cannot be used fails before data and model
    // are read, and the run's clock counts from here.
    folder = std::make_unique<RunFolder>(out_dir, 1, !comm || comm->rank() == 0);
    task = make_task();
    loop = std::make_unique<RunLoop>(*task, *folder, observer, comm);
    loop->start(resume);
  };
  if (comm) {
    together(*comm, set_up);
  } else {
    set_up();
  }
  loop->run();
  return loop->finish();
}

}  // namespace pens
