#include "pens/train/loop/run_loop.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "pens/ops/ir/error.h"
#include "pens/train/loop/report.h"

namespace pens {

namespace {

using nlohmann::json;

// FNV-1a over the values' bits: what every process's parameters must agree on.
uint64_t fingerprint(std::span<const float> values) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const float v : values) {
    h ^= std::bit_cast<uint32_t>(v);
    h *= 0x100000001B3ull;
  }
  return h;
}

}  // namespace

int64_t steps_in(double epochs, int64_t steps_per_epoch) {
  return std::max<int64_t>(1, std::llround(epochs * static_cast<double>(steps_per_epoch)));
}

RunLoop::RunLoop(RunTask& task, RunFolder& folder, TrainObserver& observer, Communicator* communicator)
    : task_(task),
      length_(task.length()),
      comm_(communicator),
      folder_(folder),
      observer_(observer),
      best_error_(std::numeric_limits<double>::infinity()) {
  total_steps_ = length_.epochs * length_.steps_per_epoch;
  folder_.set_checkpoints_kept(length_.checkpoint_keep);
}

double RunLoop::epoch_of(int64_t step) const {
  return static_cast<double>(step) / static_cast<double>(length_.steps_per_epoch);
}

void RunLoop::note(const json& m) {
  last_ = m;
  // The lowest validation error, or without a validation set the latest evaluation.
  const json validation = m.contains("validation_error") ? m["validation_error"] : json();
  const double error = validation.is_number() ? validation.get<double>() : -m.value("step", 0.0);
  if (error < best_error_) {
    best_error_ = error;
    best_ = m;
  }
}

void RunLoop::start(const Resume& resume) {
  if (!resume.on) {
    folder_.write_config(task_.config());
    folder_.start_metrics();
    begin_stage(0);
    return;
  }
  const TrainingState state =
      folder_.load_checkpoint(*task_.model().values, task_.optimizer().checkpoint_state(), resume.from);
  const std::vector<std::string> changed = folder_.accept_resume(
      task_.as_read(state.config, folder_.loaded_from()), task_.as_read(task_.config(), "the run's config"),
      task_.resumable());
  step_ = state.step;
  window_start_ = folder_.seconds();
  // Evaluations the interrupted run made after its checkpoint are dropped: the resumed
  // run makes them again.
  for (const json& m : folder_.start_metrics(step_)) {
    note(m);
    task_.recall(m);
  }
  observer_.on_message(cat("resuming from ", folder_.loaded_from(), " at step ", step_));
  for (const std::string& c : changed) observer_.on_message(cat("  changed on resume: ", c));
  if (state.version < kCheckpointVersion) {
    observer_.on_message(cat("note: checkpoint format ", state.version, " was written by an earlier pens, whose noise "
                             "draws differ; from here on the run draws with this pens' noise keys"));
  }
}

// Process 0's clock decides for all: the processes stop at the same step.
bool RunLoop::out_of_budget() const {
  if (length_.budget_minutes <= 0) return false;
  const bool out = folder_.seconds() > 60.0 * length_.budget_minutes;
  return comm_ ? comm_->broadcast(out ? 1 : 0) != 0 : out;
}

void RunLoop::run() {
  if (step_ > 0 && out_of_patience(step_)) return;  // resumed where its patience ran out
  for (; step_ < total_steps_; ++step_) {
    if (out_of_budget()) {
      observer_.on_message(cat("wall-clock budget of ", length_.budget_minutes, " minutes reached at step ", step_,
                               " (epoch ", epoch_of(step_), ")"));
      return;
    }
    const StepResult r = task_.step(step_);
    if (!r.finite) {
      diverged_ = cat("training diverged at step ", step_, " (epoch ", epoch_of(step_), "): ", r.problem);
      return;
    }
    objective_sum_ += r.objective;
    ++window_steps_;
    const int64_t done = step_ + 1;
    observer_.on_step(done, total_steps_, epoch_of(done), r.objective, folder_.seconds());
    if (done % length_.eval_every == 0 || done == total_steps_) {
      evaluate(done);
      if (out_of_patience(done)) {
        step_ = done;  // finish() checkpoints here, so a resume does not train on
        return;
      }
      if (done < total_steps_) begin_stage(done);  // stages begin where evaluations fall
    }
    if (done % length_.checkpoint_every == 0 && !checkpoint(done)) {
      diverged_ = cat("training diverged by step ", done, ": a parameter or optimizer state value is not finite");
      step_ = done;
      return;
    }
  }
}

// Every process holds the same evaluations, so all stop at the same step.
bool RunLoop::out_of_patience(int64_t done) {
  if (length_.patience_epochs <= 0 || done >= total_steps_ || !best_.is_object() || !best_.contains("step")) {
    return false;
  }
  const double best_epoch = epoch_of(best_["step"].get<int64_t>()), now = epoch_of(done);
  if (now - best_epoch < length_.patience_epochs - 1e-9) return false;
  stopped_early_ = {{"epoch", now}, {"best_epoch", best_epoch}, {"patience_epochs", length_.patience_epochs}};
  observer_.on_message(cat("no better validation error for ", now - best_epoch, " epochs (patience ",
                           length_.patience_epochs, "): stopping at epoch ", now, ", the best at epoch ", best_epoch));
  return true;
}

void RunLoop::evaluate(int64_t done) {
  const TrainingWindow window{.objective = objective_sum_ / static_cast<double>(std::max<int64_t>(1, window_steps_)),
                              .steps = window_steps_,
                              .seconds = folder_.seconds() - window_start_};
  json m = task_.evaluate(done, window);
  m["elapsed_seconds"] = folder_.seconds();
  folder_.append_metrics(m);
  observer_.on_eval(m);
  const double best_before = best_error_;
  note(m);
  if (length_.keeps_best && best_error_ < best_before) folder_.save_model(task_.model(), "best.model.json");
  objective_sum_ = 0;
  window_steps_ = 0;
  window_start_ = folder_.seconds();
}

// A stage's starting point is a metrics line (as an evaluation's, without a window of
// training behind it).
void RunLoop::begin_stage(int64_t step) {
  json m = task_.begin_stage(step);
  if (m.is_null()) return;
  m["elapsed_seconds"] = folder_.seconds();
  folder_.append_metrics(m);
  note(m);
}

bool RunLoop::checkpoint(int64_t done) {
  task_.gather_state();
  const ParamStore<float>& params = *task_.model().values;
  if (comm_) {
    // Every process applied the same updates to the same parameters; a sum that differed
    // between processes would show here.
    const uint64_t mine = fingerprint(params.values());
    const std::string problem = comm_->first_problem(
        comm_->broadcast(mine) == mine ? "" : cat("the parameters differ from process 0's at step ", done));
    if (!problem.empty()) throw CollectiveError(problem);
  }
  const TrainingState state{.step = done, .seed = length_.seed, .config = task_.config()};
  return folder_.save_checkpoint(state, params, task_.optimizer().checkpoint_state());
}

TrainSummary RunLoop::finish() {
  TrainSummary summary;
  summary.diverged = !diverged_.empty();
  if (summary.diverged) {
    observer_.on_message(diverged_ + folder_.checkpoint_note());
  } else {
    if (window_steps_ > 0 || last_.is_null()) evaluate(step_);
    checkpoint(step_);
    folder_.save_model(task_.saved_model(), "model.json");
    task_.finishing(folder_, best_);
  }
  json& s = summary.json;
  s = run_summary(summary.diverged, step_, epoch_of(step_), folder_.seconds(), task_.config());
  s["parameters"] = task_.model().values->numel();
  s["processes"] = comm_ ? comm_->size() : 1;
  if (summary.diverged) s["message"] = diverged_;
  if (!stopped_early_.is_null()) s["stopped_early"] = stopped_early_;
  if (!folder_.resume_changes().is_null()) s["changed_on_resume"] = folder_.resume_changes();
  task_.summarize(s, last_, best_);
  folder_.write_summary(s);
  if (folder_.writes()) {
    for (const std::string& problem : write_reports(folder_.dir(), task_.model())) observer_.on_message(problem);
  }
  return summary;
}

}  // namespace pens
