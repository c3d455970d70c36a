#include "pens/train/tasks/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/graph/infer.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/serialization/model_file.h"
#include "pens/train/loop/report.h"
#include "pens/train/loop/run.h"
#include "pens/train/loop/run_loop.h"
#include "pens/train/loop/step.h"
#include "pens/train/optim/groups.h"
#include "pens/train/optim/schedule.h"
#include "pens/train/tasks/batch_plan.h"
#include "pens/train/tasks/evaluation.h"

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

// A process's share of an evaluation set's rows (share_of).
std::vector<int64_t> rows_of_share(const std::vector<int64_t>& rows, int rank, int processes) {
  const Share s = share_of(rows.size(), rank, processes);
  return {rows.begin() + static_cast<std::ptrdiff_t>(s.first), rows.begin() + static_cast<std::ptrdiff_t>(s.end)};
}

std::vector<int64_t> all_rows(int64_t n) {
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rows[static_cast<size_t>(i)] = i;
  return rows;
}

// A classifier's run on a dense data set, as a task of the run loop (train/loop/run_loop.h):
// the constructor loads the model, builds its pseudo-ensemble and splits the data; each
// step feeds this process's rows of the batch and follows the schedule; an evaluation
// measures the clean parent's errors.
//
// A global batch is computed in parts ("units") of equal labeled and unlabeled rows: unit
// u holds labeled rows u * B_l / U .. and unlabeled rows u * B_u / U .., with the noise those
// rows draw in the whole batch. With batch.shards = K > 1 the units are the K shards, whose
// gradients the Step adds in a fixed order (Step::run_shards); otherwise a data-parallel
// run's units are its P processes (Step::set_communicator), and a one-process run's one
// unit is the whole batch. Data-parallel (a communicator of P > 1 processes): each process
// computes its units; evaluations are shared out and their counts summed.
class ClassifierTask : public RunTask {
 public:
  ClassifierTask(const TrainConfig& config, const TrainData& data, TrainObserver& observer, Communicator* communicator)
      : config_(config),
        data_(data),
        comm_(communicator && communicator->size() > 1 ? communicator : nullptr),
        rank_(comm_ ? comm_->rank() : 0),
        processes_(comm_ ? comm_->size() : 1),
        observer_(observer) {
    set_threads(config.threads);
    load_model_and_graphs();
    make_optimizer_and_step();
    split_data();
  }

  RunLength length() const override {
    return run_length_of(config_, config_.steps_per_epoch,
                         steps_in(config_.eval_every_epochs, config_.steps_per_epoch));
  }
  json config() const override { return to_json(config_); }
  json as_read(const json& config, const std::string& where) const override {
    return to_json(parse_train_config(config, where));
  }
  Model& model() override { return model_; }
  Optimizer& optimizer() override { return *optimizer_; }
  StepResult step(int64_t step) override;
  json evaluate(int64_t done, const TrainingWindow& window) override;
  void summarize(json& summary, const json& last, const json& best) const override;

 private:
  void load_model_and_graphs();
  void make_optimizer_and_step();
  void split_data();
  void feed(Tape<float>& tape, int64_t step, int64_t unit);
  std::string sharing() const;
  double error_over(const Dataset& share, int64_t total);

  const TrainConfig& config_;
  const TrainData& data_;
  Communicator* comm_;  // null: one process
  int rank_, processes_;
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
  std::vector<double> loss_sums_;  // the loss terms' sums since the last evaluation
};

void ClassifierTask::load_model_and_graphs() {
  model_ = load_configured_model(config_.source, config_.model, config_.model_patch);
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
  if (const std::string loaded = start_values(model_, config_.init_seed, config_.init_from); !loaded.empty()) observer_.on_message(loaded);
  const int64_t batch = unit_labeled_ + unit_unlabeled_;
  require_precision(config_.precision, config_.source);
  step_tape_ = std::make_unique<Tape<float>>(training.graph, *model_.values,
                                             CompileOptions{.batch = batch, .precision = config_.precision});
  if (step_tape_->loss_count() == 0) {
    fail(config_.model, ": no node is marked as a loss (\"flags\": [\"loss\"]; Python's ModelBuilder: loss=True), "
         "so there is no objective to train");
  }
  if (units_ > 1) check_shardable(training.graph, batch, config_.model);
  eval_tape_ = std::make_unique<Tape<float>>(build_inference(model_.graph), *model_.values,
                                             CompileOptions{.batch = config_.eval_batch, .precision = config_.precision});
  weights_ = std::make_unique<PenaltyWeights>(std::move(training.penalties));
  loss_sums_.assign(step_tape_->loss_count(), 0.0);
}

void ClassifierTask::make_optimizer_and_step() {
  ParamStore<float>& params = *model_.values;
  optimizer_ = make_optimizer_with_groups(config_.optimizer, config_.optimizer_settings, config_.schedule.learning_rate,
                                          config_.optimizer_groups, params);
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
    // The period holds every parameter it does not train.
    std::vector<const ParamEntry*> held;
    for (const ParamEntry& e : params.entries()) {
      if (std::ranges::find(period.parameters, e.name) == period.parameters.end()) held.push_back(&e);
    }
    step_->add_transform(std::make_unique<HoldParameters>(std::move(held), period.from, period.to));
  }
  for (auto& t : make_transforms(config_.transforms, params, "optimizer.transforms")) step_->add_transform(std::move(t));
}

void ClassifierTask::split_data() {
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
  validation_ = subset(train_set, rows_of_share(split.validation, rank_, processes_));
  train_eval_ = subset(train_set, rows_of_share(train_eval_rows, rank_, processes_));
  if (processes_ > 1) test_share_ = subset(data_.test, rows_of_share(all_rows(data_.test.size), rank_, processes_));
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
                           split.unlabeled.size(), " unlabeled, ", split.validation.size(), " validation",
                           config_.unlabeled_validation ? " (its images unlabeled rows as well), " : ", ",
                           data_.test.size, " test; ", model_.values->numel(), " parameters; batch ",
                           config_.batch_labeled, " labeled + ", config_.batch_unlabeled, " unlabeled; optimizer ",
                           config_.optimizer, describe_groups(config_.optimizer_groups), sharing()));
}

// How the batch is shared out, for the run's first lines: "" for one process at once.
std::string ClassifierTask::sharing() const {
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

// Unit `unit` of the step's global batch, placed there for its noise: the same batch order
// as a one-process run's, whatever the number of processes and shards.
void ClassifierTask::feed(Tape<float>& tape, int64_t step, int64_t unit) {
  const Dataset& train_set = data_.train;
  if (units_ > 1) {
    placement_.assign({{.local = 0, .global = unit * unit_labeled_, .count = unit_labeled_}});
    if (unit_unlabeled_ > 0) {
      placement_.push_back({.local = unit_labeled_, .global = config_.batch_labeled + unit * unit_unlabeled_,
                            .count = unit_unlabeled_});
    }
    tape.set_row_placement(placement_);
  }
  plan_->labeled(step * config_.batch_labeled + unit * unit_labeled_, unit_labeled_, rows_);
  gather_rows(train_set, rows_, 0, tape.input(io_.x), tape.input(io_.y));
  if (unit_unlabeled_ > 0) {
    plan_->unlabeled(step * config_.batch_unlabeled + unit * unit_unlabeled_, unit_unlabeled_, rows_);
    gather_rows(train_set, rows_, unit_labeled_, tape.input(io_.x), {});
  }
}

// The error over a whole evaluation set of `total` examples, this process holding `share`.
double ClassifierTask::error_over(const Dataset& share, int64_t total) {
  const auto share_size = static_cast<double>(share.size);
  double wrong = share.size > 0 ? std::round(classification_error(*eval_tape_, io_, share) * share_size) : 0.0;
  if (comm_) comm_->sum({&wrong, 1});
  return wrong / static_cast<double>(total);
}

StepResult ClassifierTask::step(int64_t step) {
  const PlannedStep planned = planned_step(schedule_, step, config_.steps_per_epoch);
  Tape<float>& tape = *step_tape_;
  weights_->set(tape, planned.lambda_scale);
  if (planned.restart) optimizer_->restart();
  const OptimizerStep& update = planned.update;
  const StepResult r =
      config_.batch_shards > 1
          ? step_->run_shards(update, tape, units_, first_unit_, local_units_,
                              [&](Tape<float>& t, size_t unit) { feed(t, step, static_cast<int64_t>(unit)); })
          : step_->run(update, tape, [&](Tape<float>& t, size_t) { feed(t, step, first_unit_); });
  if (r.finite) {
    for (size_t i = 0; i < loss_sums_.size(); ++i) loss_sums_[i] += r.losses[i];
  }
  return r;
}

json ClassifierTask::evaluate(int64_t done, const TrainingWindow& window) {
  const double epoch = static_cast<double>(done) / static_cast<double>(config_.steps_per_epoch);
  json m = {{"step", done}, {"epoch", epoch}, {"learning_rate", schedule_.learning_rate_at(epoch)},
            {"momentum", schedule_.momentum_at(epoch)}, {"lambda_scale", schedule_.lambda_scale_at(epoch)}};
  const double steps = static_cast<double>(std::max<int64_t>(1, window.steps));
  json losses = json::object();
  for (size_t i = 0; i < loss_sums_.size(); ++i) losses[step_tape_->loss_name(i)] = loss_sums_[i] / steps;
  m["losses"] = losses;
  m["objective"] = window.objective;
  if (recalibration_) recalibration_->run(data_.train, recalibration_rows_);
  m["train_error"] = error_over(train_eval_, train_eval_total_);
  m["validation_error"] = validation_total_ > 0 ? json(error_over(validation_, validation_total_)) : json(nullptr);
  m["test_error"] =
      data_.test.size > 0 ? json(error_over(processes_ > 1 ? test_share_ : data_.test, data_.test.size)) : json(nullptr);
  const int64_t batch = config_.batch_labeled + config_.batch_unlabeled;
  m["examples_per_second"] = static_cast<double>(window.steps * batch) / std::max(1e-9, window.seconds);
  std::fill(loss_sums_.begin(), loss_sums_.end(), 0.0);
  return m;
}

void ClassifierTask::summarize(json& s, const json& last, const json& best) const {
  s["labeled"] = plan_->split().labeled.size();
  s["unlabeled"] = plan_->split().unlabeled.size();
  s["validation"] = plan_->split().validation.size();
  if (!last.is_null()) {
    s["final"] = {{"epoch", last["epoch"]}, {"test_error", last["test_error"]}, {"validation_error", last["validation_error"]}};
  }
  if (!best.is_null()) {
    s["best_validation"] = {{"epoch", best["epoch"]}, {"test_error", best["test_error"]}, {"validation_error", best["validation_error"]}};
    s["test_error"] = best["test_error"];
  }
}

}  // namespace

std::string start_values(Model& model, uint64_t init_seed, const std::string& init_from) {
  if (!model.values) {
    model.values = std::make_shared<ParamStore<float>>(model.graph);
    model.values->initialize(model.graph, init_seed);
  }
  return init_from.empty() ? "" : initialize_from(*model.values, model.graph, init_from);
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

std::string PreparedClassifier::description() const {
  return cat(config.model, " on ", config.data_dir, " for ", config.epochs, " epochs of ", config.steps_per_epoch,
             " steps", budget_text(config.budget_minutes), ", ", threads_text(config.threads));
}

TrainSummary PreparedClassifier::train(const std::string& out_dir, TrainObserver& observer, const Resume& resume,
                                       Communicator* communicator) const {
  return pens::train(config, data, out_dir, observer, resume, communicator);
}

std::string PreparedClassifier::evaluation_line(const json& m) const {
  char line[256];
  std::snprintf(line, sizeof line, "epoch %7.2f  step %7lld  objective %.4f  train %s  val %s  test %s  %6.0f ex/s  %s",
                m["epoch"].get<double>(), static_cast<long long>(m["step"].get<int64_t>()), m["objective"].get<double>(),
                percent_text(m["train_error"]).c_str(), percent_text(m["validation_error"]).c_str(),
                percent_text(m["test_error"]).c_str(), m["examples_per_second"].get<double>(),
                duration_text(m["elapsed_seconds"].get<double>()).c_str());
  return line;
}

std::vector<std::string> PreparedClassifier::results(const json& s) const {
  std::vector<std::string> lines;
  if (s.contains("best_validation")) {
    const json& b = s["best_validation"];
    lines.push_back(cat("test error ", percent_text(b["test_error"]), " at the best validation error (",
                        percent_text(b["validation_error"]), ", epoch ", b["epoch"].get<double>(), ")"));
  }
  lines.push_back(cat("test error ", percent_text(s["final"]["test_error"]), " at the end"));
  return lines;
}

RunKind classifier_run_kind() {
  return {.name = "classifier",
          .summary = "a classifier on a dense data set (MNIST, NumPy arrays, a registered data source)",
          .prepare = [](const std::string& config_path, const json& j, const RunOptions& options,
                        std::optional<GivenData> given) -> std::unique_ptr<PreparedTask> {
            auto run = std::make_unique<PreparedClassifier>();
            TrainConfig& c = run->config;
            c = parse_train_config(j, config_path);
            apply_run_options(options, config_path, j, c);
            if (options.labels) {
              if (*options.labels < 0) fail("labels must be at least 0, got ", *options.labels);
              c.labeled = *options.labels;
            }
            if (options.split_seed) c.split_seed = *options.split_seed;
            if (options.shards) c.batch_shards = *options.shards;
            if (options.precision) c.precision = parse_precision(*options.precision, "precision");
            if (given) {
              if (options.data_dir) fail("data_dir names a folder to read, but the data is given as arrays");
              c.data_dir = given->name;
              run->data = std::move(given->data);
            } else {
              run->data = load_data(c.data_source, c.data_dir, c.data_settings);
            }
            return run;
          }};
}

TrainSummary train(const TrainConfig& config, const TrainData& data, const std::string& out_dir,
                   TrainObserver& observer, const Resume& resume, Communicator* communicator) {
  return run_task([&] { return std::make_unique<ClassifierTask>(config, data, observer, communicator); }, out_dir,
                  observer, resume, communicator);
}

}  // namespace pens
