#include "pens/train/trainer.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/graph/infer.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/serialization/model_file.h"
#include "pens/train/batch_plan.h"
#include "pens/train/evaluation.h"
#include "pens/train/report.h"
#include "pens/train/run_folder.h"
#include "pens/train/schedule.h"
#include "pens/train/step.h"

namespace pens {

namespace {

using nlohmann::json;
// Refuses a data-parallel run of an objective whose gradient, averaged over the
// processes, would not be the one-process gradient: each loss term must be a mean over
// batch rows (a `mean`, possibly times a factor free of the batch, as penalties are
// weighted) or free of the batch (a term on the parameters alone), and no moving average
// may follow a statistic of the batch.
void check_shardable(const Graph& g, int64_t batch, const std::string& source) {
  const std::vector<char> batched = batch_rows(g, batch);
  std::vector<char> reads_batch(g.size(), 0);
  for (NodeId v : g.topological_order()) {
    reads_batch[v] = batched[v];
    for (NodeId u : g.inputs(v)) reads_batch[v] = reads_batch[v] || reads_batch[u];
  }
  const std::function<bool(NodeId)> mean_of_rows = [&](NodeId v) {
    const Node& n = g[v];
    if (!reads_batch[v] || n.op->name == "mean") return true;
    if (n.op->name != "mul") return false;
    const std::vector<NodeId> in = g.inputs(v);
    return in.size() == 2 && ((!reads_batch[in[0]] && mean_of_rows(in[1])) || (!reads_batch[in[1]] && mean_of_rows(in[0])));
  };
  // Batch statistics (batch normalisation's, followed by running statistics) would be
  // each process's own rows', not the global batch's.
  for (const MovingAverage& a : g.averages()) {
    if (reads_batch[g.at(a.source)]) {
      fail(source, ": '", a.source, "' is a statistic of the batch (its moving average is '", a.param, "'): computed "
           "on each process's or shard's rows alone, it would not be the one-process value; batch normalisation "
           "needs the whole batch in one process (no batch.shards, no mpirun)");
    }
  }
  for (NodeId v : g.nodes()) {
    if (g[v].has(kLoss) && !mean_of_rows(v)) {
      fail(source, ": loss term '", g[v].name, "' (", g[v].op->name, ") is not a mean over the batch's rows: averaged "
           "over processes, its gradient would not be the one-process gradient (a data-parallel run needs each loss "
           "term to be a mean, or free of the batch)");
    }
  }
}

// Rows [n * rank / P, n * (rank + 1) / P) of n: a process's share of an evaluation set.
std::vector<int64_t> share_of(const std::vector<int64_t>& rows, int rank, int processes) {
  const auto n = static_cast<int64_t>(rows.size());
  return {rows.begin() + n * rank / processes, rows.begin() + n * (rank + 1) / processes};
}

std::vector<int64_t> all_rows(int64_t n) {
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rows[static_cast<size_t>(i)] = i;
  return rows;
}

// FNV-1a over the values' bits: what every process's parameters must agree on.
uint64_t fingerprint(std::span<const float> values) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const float v : values) {
    h ^= std::bit_cast<uint32_t>(v);
    h *= 0x100000001B3ull;
  }
  return h;
}

// One training run of a classifier, stage by stage: the constructor loads the model and
// splits the data; start() begins or resumes; run_steps() trains until the run's length,
// its budget or a divergence ends it; finish() evaluates, saves and summarizes.
//
// A global batch is computed in parts ("units") of equal labeled and unlabeled rows: unit
// u holds labeled rows u * B_l / U .. and unlabeled rows u * B_u / U .., with the noise those
// rows draw in the whole batch. With batch.shards = K > 1 the units are the K shards, whose
// gradients the Step adds in a fixed order (Step::run_shards); otherwise a data-parallel
// run's units are its P processes (Step::set_communicator), and a one-process run's one
// unit is the whole batch. Data-parallel (a communicator of P > 1 processes): each process
// computes its units; evaluations are shared out and their counts summed; process 0 alone
// writes the run folder.
class ClassifierRun {
 public:
  ClassifierRun(const TrainConfig& config, const TrainData& data, const std::string& out_dir, TrainObserver& observer,
                Communicator* communicator)
      : config_(config),
        data_(data),
        comm_(communicator && communicator->size() > 1 ? communicator : nullptr),
        rank_(comm_ ? comm_->rank() : 0),
        processes_(comm_ ? comm_->size() : 1),
        folder_(out_dir, config.checkpoint_keep, rank_ == 0),
        observer_(observer) {
    set_threads(config.threads);
    load_model_and_graphs();
    make_optimizer_and_step();
    split_data();
  }

  void start(const Resume& resume);
  void run_steps();
  TrainSummary finish();

 private:
  void load_model_and_graphs();
  void make_optimizer_and_step();
  // Holds the parameters that the trainable period at `epoch` does not train (none outside
  // such periods).
  void hold_for(double epoch);
  void split_data();
  void feed(Tape<float>& tape, int64_t unit);
  std::string sharing() const;
  double error_over(const Dataset& share, int64_t total);
  bool out_of_budget() const;
  void evaluate(int64_t done);
  bool checkpoint(int64_t done);
  double epoch_of(int64_t step) const {
    return static_cast<double>(step) / static_cast<double>(config_.steps_per_epoch);
  }
  // The error a run selects its best parameters by: the validation error, or without a
  // validation set the latest evaluation.
  double selection_error(const json& m) const {
    return validation_.size > 0 ? m["validation_error"].get<double>() : -m["step"].get<double>();
  }
  void note(const json& m);  // keeps the last and the best evaluation

  const TrainConfig& config_;
  const TrainData& data_;
  Communicator* comm_;  // null: one process
  int rank_, processes_;
  RunFolder folder_;
  TrainObserver& observer_;

  // The model and its graphs.
  Model model_;
  ClassifierIo io_;
  Schedule schedule_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Step> step_;
  std::unique_ptr<Tape<float>> step_tape_, eval_tape_;
  std::unique_ptr<StatisticsRecalibration> recalibration_;  // null unless eval.recalibrate_statistics
  std::unique_ptr<PenaltyWeights> weights_;
  // Per config_.trainable_periods, the parameters each one holds; the one in force.
  std::vector<std::vector<const ParamEntry*>> held_by_period_;
  int held_period_ = -1;

  // The data: this process's rows of each batch, and its shares of the evaluation sets.
  // Units of each batch: this process computes units first_unit_ .. + local_units_ - 1.
  int64_t units_ = 1, first_unit_ = 0, local_units_ = 1;
  int64_t unit_labeled_ = 0, unit_unlabeled_ = 0;
  std::vector<RowRun> placement_;  // the unit being fed, in the global batch
  std::unique_ptr<BatchPlan> plan_;
  Dataset validation_, train_eval_, test_share_;
  int64_t validation_total_ = 0, train_eval_total_ = 0;
  std::vector<int64_t> rows_;
  std::vector<int64_t> recalibration_rows_;  // the same examples at every evaluation

  // Progress.
  int64_t step_count_ = 0, total_steps_ = 0;
  std::vector<double> loss_sums_;
  double objective_sum_ = 0, window_start_ = 0;
  int64_t window_steps_ = 0;
  double best_error_ = std::numeric_limits<double>::infinity();
  json best_ = nullptr, last_ = nullptr;
  std::string diverged_;
};

void ClassifierRun::load_model_and_graphs() {
  model_ = load_configured_model(config_.source, config_.model);
  io_ = classifier_io(model_.graph, config_.model);
  check_data_fits(model_.graph, io_, data_.train, config_.model, config_.data_dir);
  const bool semi_supervised = config_.batch_unlabeled > 0;
  const int64_t shards = config_.batch_shards;
  if (shards > 1) {
    if ((shards & (shards - 1)) != 0) fail("batch.shards = ", shards, " must be a power of two");
    if (shards % processes_ != 0) fail("batch.shards = ", shards, " must be a multiple of the ", processes_, " processes");
  }
  units_ = std::max<int64_t>(shards, processes_);
  local_units_ = units_ / processes_;
  first_unit_ = rank_ * local_units_;
  if (config_.batch_labeled % units_ != 0 || config_.batch_unlabeled % units_ != 0) {
    fail("batch.labeled = ", config_.batch_labeled, " and batch.unlabeled = ", config_.batch_unlabeled,
         " must each divide evenly among the ", units_, shards > 1 ? " shards" : " processes");
  }
  unit_labeled_ = config_.batch_labeled / units_;
  unit_unlabeled_ = config_.batch_unlabeled / units_;
  schedule_ = run_schedule(config_, model_);
  // The model as it is, or its pseudo-ensemble.
  PseudoEnsemble training{.graph = model_.graph};
  if (model_.ensemble) {
    PseudoEnsembleSpec spec = *model_.ensemble;
    spec.lambda_schedule = schedule_.lambda_stages;
    training = build_pseudo_ensemble(model_.graph, spec, {.labeled_rows = semi_supervised ? unit_labeled_ : -1});
  } else if (semi_supervised) {
    fail(config_.model, ": batch.unlabeled = ", config_.batch_unlabeled,
         " but the model has no pseudo_ensemble section: nothing would read unlabeled rows");
  }
  if (const std::string loaded = start_values(model_, config_); !loaded.empty()) observer_.on_message(loaded);
  const int64_t batch = unit_labeled_ + unit_unlabeled_;
  step_tape_ = std::make_unique<Tape<float>>(training.graph, *model_.values, CompileOptions{.batch = batch});
  if (step_tape_->loss_count() == 0) {
    fail(config_.model, ": no node is marked as a loss (\"flags\": [\"loss\"]; Python's ModelBuilder: loss=True), "
         "so there is no objective to train");
  }
  if (units_ > 1) check_shardable(training.graph, batch, config_.model);
  eval_tape_ = std::make_unique<Tape<float>>(build_inference(model_.graph), *model_.values,
                                             CompileOptions{.batch = config_.eval_batch});
  weights_ = std::make_unique<PenaltyWeights>(std::move(training.penalties));
  loss_sums_.assign(step_tape_->loss_count(), 0.0);
}

void ClassifierRun::make_optimizer_and_step() {
  ParamStore<float>& params = *model_.values;
  optimizer_ = make_optimizer(config_.optimizer, params, config_.optimizer_settings);
  step_ = std::make_unique<Step>(params, *optimizer_,
                                 model_constraints(model_.graph, params, parse_max_norm_rule(config_.max_norm_rule)),
                                 config_.seed);
  step_->set_communicator(comm_);
  for (const TrainablePeriod& period : config_.trainable_periods) {
    for (const std::string& name : period.parameters) {
      if (!params.find(name)) {
        fail(config_.model, ": lambda_schedule: trainable names '", name, "', which is not a parameter of the model");
      }
    }
    std::vector<const ParamEntry*>& held = held_by_period_.emplace_back();
    for (const ParamEntry& e : params.entries()) {
      if (std::ranges::find(period.parameters, e.name) == period.parameters.end()) held.push_back(&e);
    }
  }
}

void ClassifierRun::hold_for(double epoch) {
  int period = -1;
  for (size_t i = 0; i < config_.trainable_periods.size(); ++i) {
    const TrainablePeriod& p = config_.trainable_periods[i];
    if (epoch >= p.from && epoch < p.to) period = static_cast<int>(i);
  }
  if (period == held_period_) return;
  step_->hold(period < 0 ? std::vector<const ParamEntry*>{} : held_by_period_[static_cast<size_t>(period)]);
  held_period_ = period;
}

void ClassifierRun::split_data() {
  const Dataset& train_set = data_.train;
  const int64_t width = model_.graph[io_.x].attrs.get_ints("shape").back();
  if (train_set.dim != width) {
    fail(config_.model, ": input '", io_.x, "' takes ", width, " features, the data has ", train_set.dim);
  }
  plan_ = std::make_unique<BatchPlan>(config_, train_set);
  const Split& split = plan_->split();
  const auto labeled = static_cast<int64_t>(split.labeled.size());
  const std::vector<int64_t> train_eval_rows(
      split.labeled.begin(), split.labeled.begin() + std::min<int64_t>(config_.train_error_examples, labeled));
  validation_ = subset(train_set, share_of(split.validation, rank_, processes_));
  train_eval_ = subset(train_set, share_of(train_eval_rows, rank_, processes_));
  if (processes_ > 1) test_share_ = subset(data_.test, share_of(all_rows(data_.test.size), rank_, processes_));
  validation_total_ = static_cast<int64_t>(split.validation.size());
  train_eval_total_ = static_cast<int64_t>(train_eval_rows.size());
  const std::vector<int64_t>& pool = plan_->pool();
  // Batch statistics need one process and one shard, which check_shardable has enforced.
  if (config_.recalibrate_statistics > 0) {
    const int64_t batch = config_.batch_labeled + config_.batch_unlabeled;
    const int64_t examples = std::min<int64_t>(config_.recalibrate_statistics, static_cast<int64_t>(pool.size()));
    recalibration_ = std::make_unique<StatisticsRecalibration>(model_.graph, *model_.values, batch);
    Cycler(pool, config_.seed, uint64_t{1} << 40).take(0, examples, recalibration_rows_);
    observer_.on_message(cat("before each evaluation, running statistics from ", examples / batch, " batches of ", batch,
                             " training examples"));
  }
  observer_.on_message(cat("split ", config_.split_seed, ": ", split.labeled.size(), " labeled, ",
                           split.unlabeled.size(), " unlabeled, ", split.validation.size(), " validation, ",
                           data_.test.size, " test; ", model_.values->numel(), " parameters; batch ",
                           config_.batch_labeled, " labeled + ", config_.batch_unlabeled, " unlabeled; optimizer ",
                           config_.optimizer, sharing()));
}

// How the batch is shared out, for the run's first lines: "" for one process at once.
std::string ClassifierRun::sharing() const {
  std::string out;
  if (config_.batch_shards > 1) {
    out += cat("; ", config_.batch_shards, " shards of ", unit_labeled_, " labeled + ", unit_unlabeled_,
               " unlabeled rows, their gradients added in a fixed order");
  }
  if (processes_ > 1) {
    out += cat("; ", processes_, " processes, each computing ", local_units_ * unit_labeled_, " labeled + ",
               local_units_ * unit_unlabeled_, " unlabeled rows of every batch");
  }
  return out;
}

void ClassifierRun::note(const json& m) {
  last_ = m;
  if (selection_error(m) < best_error_) {
    best_error_ = selection_error(m);
    best_ = m;
  }
}

void ClassifierRun::start(const Resume& resume) {
  total_steps_ = config_.epochs * config_.steps_per_epoch;
  if (!resume.on) {
    folder_.write_config(to_json(config_));
    folder_.start_metrics();
    return;
  }
  const TrainingState state = folder_.load_checkpoint(*model_.values, optimizer_->checkpoint_state(), resume.from);
  // Read back as this pens reads configs: one from an earlier pens gets today's defaults.
  const std::vector<std::string> changed =
      folder_.accept_resume(to_json(parse_train_config(state.config, folder_.loaded_from())), to_json(config_));
  step_count_ = state.step;
  window_start_ = folder_.seconds();
  // Evaluations the interrupted run made after its checkpoint are dropped: the resumed
  // run makes them again.
  for (const json& m : folder_.start_metrics(step_count_)) note(m);
  observer_.on_message(cat("resuming from ", folder_.loaded_from(), " at step ", step_count_));
  for (const std::string& c : changed) observer_.on_message(cat("  changed on resume: ", c));
  if (state.version < kCheckpointVersion) {
    observer_.on_message(cat("note: checkpoint format ", state.version, " was written by an earlier pens, whose noise "
                             "draws differ; from here on the run draws with this pens' noise keys"));
  }
}

// Unit `unit` of the step's global batch, placed there for its noise: the same batch order
// as a one-process run's, whatever the number of processes and shards.
void ClassifierRun::feed(Tape<float>& tape, int64_t unit) {
  const Dataset& train_set = data_.train;
  if (units_ > 1) {
    placement_.assign({{.local = 0, .global = unit * unit_labeled_, .count = unit_labeled_}});
    if (unit_unlabeled_ > 0) {
      placement_.push_back({.local = unit_labeled_, .global = config_.batch_labeled + unit * unit_unlabeled_,
                            .count = unit_unlabeled_});
    }
    tape.set_row_placement(placement_);
  }
  plan_->labeled(step_count_ * config_.batch_labeled + unit * unit_labeled_, unit_labeled_, rows_);
  gather_rows(train_set, rows_, 0, tape.input(io_.x), tape.input(io_.y));
  if (unit_unlabeled_ > 0) {
    plan_->unlabeled(step_count_ * config_.batch_unlabeled + unit * unit_unlabeled_, unit_unlabeled_, rows_);
    gather_rows(train_set, rows_, unit_labeled_, tape.input(io_.x), {});
  }
}

// The error over a whole evaluation set of `total` examples, this process holding `share`.
double ClassifierRun::error_over(const Dataset& share, int64_t total) {
  const auto share_size = static_cast<double>(share.size);
  double wrong = share.size > 0 ? std::round(classification_error(*eval_tape_, io_, share) * share_size) : 0.0;
  if (comm_) comm_->sum({&wrong, 1});
  return wrong / static_cast<double>(total);
}

// Process 0's clock decides for all: the processes stop at the same step.
bool ClassifierRun::out_of_budget() const {
  if (config_.budget_minutes <= 0) return false;
  const bool out = folder_.seconds() > 60.0 * config_.budget_minutes;
  return comm_ ? comm_->broadcast(out ? 1 : 0) != 0 : out;
}

void ClassifierRun::run_steps() {
  const auto eval_every =
      std::max<int64_t>(1, std::llround(config_.eval_every_epochs * static_cast<double>(config_.steps_per_epoch)));
  const auto checkpoint_every =
      std::max<int64_t>(1, std::llround(config_.checkpoint_every_epochs * static_cast<double>(config_.steps_per_epoch)));
  Tape<float>& tape = *step_tape_;
  for (; step_count_ < total_steps_; ++step_count_) {
    const PlannedStep planned = planned_step(schedule_, step_count_, config_.steps_per_epoch);
    const double epoch = planned.epoch;
    if (out_of_budget()) {
      observer_.on_message(cat("wall-clock budget of ", config_.budget_minutes, " minutes reached at step ", step_count_,
                               " (epoch ", epoch, ")"));
      return;
    }
    weights_->set(tape, planned.lambda_scale);
    if (planned.restart) optimizer_->restart();
    hold_for(epoch);
    const OptimizerStep& update = planned.update;
    const StepResult r =
        config_.batch_shards > 1
            ? step_->run_shards(update, tape, units_, first_unit_, local_units_,
                                [&](Tape<float>& t, size_t unit) { feed(t, static_cast<int64_t>(unit)); })
            : step_->run(update, tape, [&](Tape<float>& t, size_t) { feed(t, first_unit_); });
    if (!r.finite) {
      diverged_ = cat("training diverged at step ", step_count_, " (epoch ", epoch, "): ", r.problem);
      return;
    }
    objective_sum_ += r.objective;
    for (size_t i = 0; i < loss_sums_.size(); ++i) loss_sums_[i] += r.losses[i];
    ++window_steps_;
    const int64_t done = step_count_ + 1;
    observer_.on_step(done, total_steps_, epoch, r.objective, folder_.seconds());
    if (done % eval_every == 0 || done == total_steps_) evaluate(done);
    if (done % checkpoint_every == 0 && !checkpoint(done)) {
      diverged_ = cat("training diverged by step ", done, ": a parameter or optimizer state value is not finite");
      step_count_ = done;
      return;
    }
  }
}

void ClassifierRun::evaluate(int64_t done) {
  const double epoch = epoch_of(done);
  const double elapsed = folder_.seconds();
  json m = {{"step", done}, {"epoch", epoch}, {"learning_rate", schedule_.learning_rate_at(epoch)},
            {"momentum", schedule_.momentum_at(epoch)}, {"lambda_scale", schedule_.lambda_scale_at(epoch)}};
  const double steps = static_cast<double>(std::max<int64_t>(1, window_steps_));
  json losses = json::object();
  for (size_t i = 0; i < loss_sums_.size(); ++i) losses[step_tape_->loss_name(i)] = loss_sums_[i] / steps;
  m["losses"] = losses;
  m["objective"] = objective_sum_ / steps;
  if (recalibration_) recalibration_->run(data_.train, recalibration_rows_);
  m["train_error"] = error_over(train_eval_, train_eval_total_);
  m["validation_error"] = validation_total_ > 0 ? json(error_over(validation_, validation_total_)) : json(nullptr);
  m["test_error"] = error_over(processes_ > 1 ? test_share_ : data_.test, data_.test.size);
  const int64_t batch = config_.batch_labeled + config_.batch_unlabeled;
  m["examples_per_second"] = static_cast<double>(window_steps_ * batch) / std::max(1e-9, elapsed - window_start_);
  m["elapsed_seconds"] = elapsed;
  folder_.append_metrics(m);
  observer_.on_eval(m);
  const double best_before = best_error_;
  note(m);
  if (best_error_ < best_before) folder_.save_model(model_, "best.model.json");
  std::fill(loss_sums_.begin(), loss_sums_.end(), 0.0);
  objective_sum_ = 0;
  window_steps_ = 0;
  window_start_ = folder_.seconds();
}

bool ClassifierRun::checkpoint(int64_t done) {
  if (comm_) {
    // Every process applied the same updates to the same parameters; a sum that differed
    // between processes would show here.
    const uint64_t mine = fingerprint(model_.values->values());
    const std::string problem = comm_->first_problem(
        comm_->broadcast(mine) == mine ? "" : cat("the parameters differ from process 0's at step ", done));
    if (!problem.empty()) throw CollectiveError(problem);
  }
  const TrainingState state{.step = done, .seed = config_.seed, .config = to_json(config_)};
  return folder_.save_checkpoint(state, *model_.values, optimizer_->checkpoint_state());
}

TrainSummary ClassifierRun::finish() {
  TrainSummary summary;
  summary.diverged = !diverged_.empty();
  if (summary.diverged) {
    observer_.on_message(diverged_ + folder_.checkpoint_note());
  } else {
    if (window_steps_ > 0 || last_.is_null()) evaluate(step_count_);
    checkpoint(step_count_);
    folder_.save_model(model_, "model.json");
  }
  json& s = summary.json;
  s = run_summary(summary.diverged, step_count_, epoch_of(step_count_), folder_.seconds(), to_json(config_));
  s["labeled"] = plan_->split().labeled.size();
  s["unlabeled"] = plan_->split().unlabeled.size();
  s["validation"] = plan_->split().validation.size();
  s["parameters"] = model_.values->numel();
  s["processes"] = processes_;
  if (summary.diverged) s["message"] = diverged_;
  if (!folder_.resume_changes().is_null()) s["changed_on_resume"] = folder_.resume_changes();
  if (!last_.is_null()) {
    s["final"] = {{"epoch", last_["epoch"]}, {"test_error", last_["test_error"]}, {"validation_error", last_["validation_error"]}};
  }
  if (!best_.is_null()) {
    s["best_validation"] = {{"epoch", best_["epoch"]}, {"test_error", best_["test_error"]}, {"validation_error", best_["validation_error"]}};
    s["test_error"] = best_["test_error"];
  }
  folder_.write_summary(s);
  if (folder_.writes()) {
    for (const std::string& problem : write_reports(folder_.dir(), model_)) observer_.on_message(problem);
  }
  return summary;
}

}  // namespace

std::string start_values(Model& model, const TrainConfig& config) {
  if (!model.values) {
    model.values = std::make_shared<ParamStore<float>>(model.graph);
    model.values->initialize(model.graph, config.init_seed);
  }
  return config.init_from.empty() ? "" : initialize_from(*model.values, model.graph, config.init_from);
}

std::string initialize_from(ParamStore<float>& params, const Graph& graph, const std::string& path) {
  if (!std::filesystem::exists(path)) fail(path, ": no such model file to initialize from (pens pretrain writes one)");
  const Model source = load_model(path);
  if (!source.values) fail(path, ": holds no parameter values to initialize from");
  const std::vector<std::string> copied = copy_shared_values(params, *source.values, path);
  if (copied.empty()) fail(path, ": shares no parameter name with the model");
  params.start_averages_at_sources(graph, copied);
  std::string names;
  for (const std::string& n : copied) names += (names.empty() ? "" : ", ") + n;
  return cat("initialized ", copied.size(), " of ", params.entries().size(), " parameters from ", path, ": ", names);
}

TrainSummary train(const TrainConfig& config, const TrainData& data, const std::string& out_dir,
                   TrainObserver& observer, const Resume& resume, Communicator* communicator) {
  std::unique_ptr<ClassifierRun> run;
  const auto set_up = [&] {
    run = std::make_unique<ClassifierRun>(config, data, out_dir, observer, communicator);
    run->start(resume);
  };
  if (communicator && communicator->size() > 1) {
    together(*communicator, set_up);
  } else {
    set_up();
  }
  run->run_steps();
  return run->finish();
}

}  // namespace pens
