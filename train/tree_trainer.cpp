#include "pens/train/tree_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

#include "pens/models/dataset.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/serialization/model_file.h"
#include "pens/train/report.h"
#include "pens/train/run_folder.h"
#include "pens/train/step.h"
#include "pens/train/trainer.h"
#include "pens/train/tree_model.h"

namespace pens {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }


// Trees carrying at least one label for the task (binary: not every node neutral).
std::vector<int64_t> trainable(const std::vector<SentimentTree>& trees, SentimentTask task) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < trees.size(); ++i) {
    const SentimentTree& t = trees[i];
    bool any = false;
    for (int8_t l : t.label) any = any || task_label(task, l) >= 0;
    if (any) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

}  // namespace

void add_l2_gradients(ParamStore<float>& params, const std::map<std::string, double>& l2) {
  for (const auto& [name, lambda] : l2) {
    if (lambda <= 0) continue;
    float* g = params.grad(name).data;
    const float* v = params.value(name).data;
    const auto l = static_cast<float>(lambda);
    parallel_ranges(params.at(name).shape.numel(), [&](int64_t begin, int64_t count) {
      for (int64_t i = begin; i < begin + count; ++i) g[i] += l * v[i];
    });
  }
}

namespace {

class TreeRun {
 public:
  TreeRun(const TreeConfig& config, const TreeData& data, const std::string& out_dir, TrainObserver& observer);
  void start(const Resume& resume);
  void run_steps();
  TrainSummary finish();

 private:
  void evaluate(int64_t done);
  nlohmann::json final_evaluation() const;
  bool checkpoint(int64_t done);
  void regularize(ParamStore<float>& params);
  bool restarts_at(int64_t epoch) const {
    const int64_t every = config_.restart_every_epochs, before = config_.restart_before_epoch;
    return every > 0 && epoch > 0 && epoch % every == 0 && (before == 0 || epoch < before);
  }
  // Evaluation's noise seed (subspace draws), apart from training's.
  uint64_t eval_seed() const { return config_.seed + 0x5eed; }
  double epoch_of(int64_t step) const { return static_cast<double>(step) / static_cast<double>(steps_per_epoch_); }

  const TreeConfig& config_;
  const TreeData& data_;
  SentimentTask task_;
  RunFolder folder_;
  TrainObserver& observer_;
  Model model_;
  std::unique_ptr<TreeModel> trees_;
  Schedule lambda_schedule_;  // its λ stages: the config's lambda_schedule, else the model's
  bool has_penalties() const { return model_.ensemble && !model_.ensemble->penalties.empty(); }
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Step> step_;
  std::vector<int64_t> train_rows_;  // trainable training trees
  std::vector<SentimentTree> train_eval_;
  int64_t steps_per_epoch_ = 0, step_count_ = 0, total_steps_ = 0;
  double objective_sum_ = 0, window_start_ = 0;
  int64_t window_steps_ = 0, window_nodes_ = 0;
  double best_accuracy_ = -1;
  json best_ = nullptr, last_ = nullptr;
  std::string diverged_;
};

TreeRun::TreeRun(const TreeConfig& config, const TreeData& data, const std::string& out_dir, TrainObserver& observer)
    : config_(config), data_(data), task_(parse_sentiment_task(config.task)), folder_(out_dir, config.checkpoint_keep), observer_(observer) {
  set_threads(config.threads);
  model_ = load_configured_model(config.source, config.model);
  try {
    trees_ = std::make_unique<TreeModel>(model_, task_, 1.0 / static_cast<double>(config.batch_trees));
  } catch (const Error& e) {
    fail(config.source.empty() ? "" : config.source + ": ", "model ", config.model, ": ", e.what());
  }
  if (model_.ensemble) lambda_schedule_.lambda_stages = config.lambda_schedule.value_or(model_.ensemble->lambda_schedule);
  if (config.lambda_schedule && !has_penalties()) {
    fail(config.source.empty() ? "" : config.source + ": ", "lambda_schedule: ", config.model,
         " has no pseudo-ensemble penalty whose λ it could scale");
  }
  if (!model_.values) {
    model_.values = std::make_shared<ParamStore<float>>(model_.graph);
    model_.values->initialize(model_.graph, config.init_seed);
  }
  ParamStore<float>& params = *model_.values;
  if (!config.init_from.empty()) observer.on_message(initialize_from(params, model_.graph, config.init_from));
  if (const ParamEntry* e = params.find("E"); e && e->shape[0] != data.vocabulary.size()) {
    fail(config.model, ": E has ", e->shape[0], " rows but the vocabulary of ", config.data_dir, " with min_count ",
         config.vocabulary.min_count, config.vocabulary.lowercase ? " (lowercased)" : "", " has ",
         data.vocabulary.size(), " words (pens new ctn --vocabulary ", data.vocabulary.size(), ")");
  }
  for (const auto& [name, value] : config.l2) {
    if (!params.find(name)) fail("l2.", name, ": the model has no parameter '", name, "'");
  }
  optimizer_ = make_optimizer(config.optimizer, params, config.optimizer_settings);
  step_ = std::make_unique<Step>(params, *optimizer_, std::vector<std::unique_ptr<Constraint>>{}, config.seed);
  step_->set_gradient_hook([this](ParamStore<float>& p) { regularize(p); });
  train_rows_ = trainable(data.bank.train, task_);
  if (train_rows_.empty()) fail(config.data_dir, ": no training tree carries a label for the ", config.task, " task");
  steps_per_epoch_ = (static_cast<int64_t>(train_rows_.size()) + config.batch_trees - 1) / config.batch_trees;
  const std::vector<int64_t> order = permutation(static_cast<int64_t>(data.bank.train.size()), config.seed, 7);
  for (size_t i = 0; i < order.size() && static_cast<int64_t>(train_eval_.size()) < config.train_eval_trees; ++i) {
    train_eval_.push_back(data.bank.train[static_cast<size_t>(order[i])]);
  }
  observer.on_message(cat(config.task, " task: ", train_rows_.size(), " training trees, ", data.bank.dev.size(), " dev, ",
                          data.bank.test.size(), " test; vocabulary ", data.vocabulary.size(), " words; ",
                          params.numel(), " parameters; ", config.batch_trees, " trees per step, ", steps_per_epoch_,
                          " steps per epoch; optimizer ", config.optimizer,
                          trees_->samples_subspaces() ? cat("; evaluation averages ", config.eval_samples, " subspace draws")
                                                      : std::string("; evaluation by the clean parent")));
}

void TreeRun::regularize(ParamStore<float>& params) {
  add_l2_gradients(params, config_.l2);
  if (epoch_of(step_count_) < config_.freeze_words_epochs && params.find("E")) params.grad("E").arr().setZero();
}

void TreeRun::start(const Resume& resume) {
  total_steps_ = config_.epochs * steps_per_epoch_;
  if (!resume.on) {
    folder_.write_config(to_json(config_));
    folder_.start_metrics();
    return;
  }
  const TrainingState state = folder_.load_checkpoint(*model_.values, optimizer_->checkpoint_state(), resume.from);
  // Both sides read as configs, so defaults a caller left unset compare equal.
  const std::vector<std::string> changed =
      folder_.accept_resume(to_json(parse_tree_config(state.config, folder_.loaded_from())),
                              to_json(parse_tree_config(to_json(config_), "the run's config")));
  step_count_ = state.step;
  window_start_ = folder_.seconds();
  for (const json& m : folder_.start_metrics(step_count_)) {
    last_ = m;
    if (m["dev_root_accuracy"].get<double>() > best_accuracy_) {
      best_accuracy_ = m["dev_root_accuracy"].get<double>();
      best_ = m;
    }
  }
  observer_.on_message(cat("resuming from ", folder_.loaded_from(), " at step ", step_count_));
  for (const std::string& c : changed) observer_.on_message(cat("  changed on resume: ", c));
}

void TreeRun::run_steps() {
  const auto checkpoint_every = std::max<int64_t>(
      1, std::llround(config_.checkpoint_every_epochs * static_cast<double>(steps_per_epoch_)));
  const auto batch = static_cast<size_t>(config_.batch_trees);
  TreeStepGraphs step_graphs;
  std::vector<const SentimentTree*> members;
  std::vector<uint64_t> examples;
  std::vector<int64_t> order;
  int64_t order_epoch = -1;
  ParamStore<float>& params = *model_.values;
  for (; step_count_ < total_steps_; ++step_count_) {
    const int64_t epoch = step_count_ / steps_per_epoch_;
    if (config_.budget_minutes > 0 && folder_.seconds() > 60.0 * config_.budget_minutes) {
      observer_.on_message(cat("wall-clock budget of ", config_.budget_minutes, " minutes reached at step ", step_count_,
                               " (epoch ", epoch_of(step_count_), ")"));
      return;
    }
    if (epoch != order_epoch) {  // each epoch visits the trees in its own order
      order = permutation(static_cast<int64_t>(train_rows_.size()), config_.seed, 1000 + static_cast<uint64_t>(epoch));
      order_epoch = epoch;
    }
    const size_t first = static_cast<size_t>(step_count_ % steps_per_epoch_) * batch;
    const size_t count = std::min(batch, order.size() - first);
    members.clear(), examples.clear();
    for (size_t i = 0; i < count; ++i) {
      const auto index = static_cast<size_t>(train_rows_[static_cast<size_t>(order[first + i])]);
      members.push_back(&data_.bank.train[index]);
      examples.push_back(index + 1);
      window_nodes_ += members.back()->size();
    }
    if (step_count_ % steps_per_epoch_ == 0 && restarts_at(epoch)) optimizer_->restart();
    step_graphs.assign(*trees_, params, members, examples, lambda_schedule_.lambda_scale_at(epoch_of(step_count_)),
                       static_cast<size_t>(config_.batch_groups));
    const OptimizerStep update{.step = step_count_, .learning_rate = config_.learning_rate, .momentum = 0};
    const StepResult r = step_graphs.run(*step_, update);
    if (!r.finite) {
      diverged_ = cat("training diverged at step ", step_count_, " (epoch ", epoch_of(step_count_), "): ", r.problem);
      return;
    }
    objective_sum_ += r.objective;
    ++window_steps_;
    const int64_t done = step_count_ + 1;
    observer_.on_step(done, total_steps_, epoch_of(done), r.objective, folder_.seconds());
    if (done % steps_per_epoch_ == 0 || done == total_steps_) evaluate(done);
    if (done % checkpoint_every == 0 && !checkpoint(done)) {
      diverged_ = cat("training diverged by step ", done, ": a parameter or optimizer state value is not finite");
      step_count_ = done;
      return;
    }
  }
}

void TreeRun::evaluate(int64_t done) {
  const double train_seconds = folder_.seconds() - window_start_;
  ParamStore<float>& params = *model_.values;
  const Clock::time_point eval_start = Clock::now();
  const TreeEvaluation train = trees_->evaluate(params, train_eval_, config_.eval_samples, eval_seed());
  const TreeEvaluation dev = trees_->evaluate(params, data_.bank.dev, config_.eval_samples, eval_seed());
  const TreeEvaluation test = trees_->evaluate(params, data_.bank.test, config_.eval_samples, eval_seed());
  int64_t eval_nodes = 0;
  for (const std::vector<SentimentTree>* set : {&std::as_const(train_eval_), &data_.bank.dev, &data_.bank.test}) {
    for (const SentimentTree& t : *set) eval_nodes += t.size();
  }
  const double eval_seconds = seconds_since(eval_start);
  const double steps = static_cast<double>(std::max<int64_t>(1, window_steps_));
  json m = {{"step", done},
            {"epoch", epoch_of(done)},
            {"objective", objective_sum_ / steps},
            {"train_root_accuracy", train.root_accuracy()},
            {"dev_root_accuracy", dev.root_accuracy()},
            {"test_root_accuracy", test.root_accuracy()},
            {"dev_node_accuracy", dev.node_accuracy()},
            {"test_node_accuracy", test.node_accuracy()},
            // As errors too, for the learning curve shared with MNIST runs.
            {"train_error", 1 - train.root_accuracy()},
            {"validation_error", 1 - dev.root_accuracy()},
            {"test_error", 1 - test.root_accuracy()},
            {"test_confusion", test.confusion},
            {"train_nodes_per_second", static_cast<double>(window_nodes_) / std::max(1e-9, train_seconds)},
            {"eval_nodes_per_second", static_cast<double>(eval_nodes) / std::max(1e-9, eval_seconds)},
            {"elapsed_seconds", folder_.seconds()}};
  // The scale of the penalties' λ in the step just taken.
  if (has_penalties()) m["lambda_scale"] = lambda_schedule_.lambda_scale_at(epoch_of(done - 1));
  folder_.append_metrics(m);
  observer_.on_eval(m);
  observer_.on_message(cat("epoch ", epoch_of(done), ": objective ", m["objective"].get<double>(), ", root accuracy train ",
                           train.root_accuracy(), " dev ", dev.root_accuracy(), " test ", test.root_accuracy(), " (",
                           std::lround(m["train_nodes_per_second"].get<double>()), " nodes/s training)"));
  last_ = m;
  if (dev.root_accuracy() > best_accuracy_) {
    best_accuracy_ = dev.root_accuracy();
    best_ = m;
    folder_.save_model(model_, "best.model.json");
  }
  objective_sum_ = 0;
  window_steps_ = window_nodes_ = 0;
  window_start_ = folder_.seconds();
}

// The best-dev model (best.model.json, so that a resumed run finds it too) on dev and test
// with eval.final_samples subspace draws; null for a model without subspace sampling, or
// when the epochs' evaluations used as many draws.
json TreeRun::final_evaluation() const {
  const int64_t samples = config_.final_samples;
  const bool again = !best_.is_null() && trees_->samples_subspaces() && samples > 0 && samples != config_.eval_samples;
  if (!again) return nullptr;
  const Model best = load_model(folder_.path("best.model.json"));
  const TreeEvaluation dev = trees_->evaluate(*best.values, data_.bank.dev, samples, eval_seed());
  const TreeEvaluation test = trees_->evaluate(*best.values, data_.bank.test, samples, eval_seed());
  observer_.on_message(cat("the best dev epoch's model (epoch ", best_["epoch"].get<double>(), ") with ", samples,
                           " subspace draws: root accuracy dev ", dev.root_accuracy(), " test ", test.root_accuracy()));
  return {{"samples", samples},
          {"dev_root_accuracy", dev.root_accuracy()},
          {"test_root_accuracy", test.root_accuracy()},
          {"test_node_accuracy", test.node_accuracy()},
          {"test_confusion", test.confusion}};
}

bool TreeRun::checkpoint(int64_t done) {
  const TrainingState state{.step = done, .seed = config_.seed, .config = to_json(config_)};
  return folder_.save_checkpoint(state, *model_.values, optimizer_->checkpoint_state());
}

TrainSummary TreeRun::finish() {
  TrainSummary summary;
  summary.diverged = !diverged_.empty();
  if (summary.diverged) {
    observer_.on_message(diverged_ + folder_.checkpoint_note());
  } else {
    if (window_steps_ > 0 || last_.is_null()) evaluate(step_count_);
    checkpoint(step_count_);
    folder_.save_model(model_, "model.json");
  }
  // Before the summary's clock is read: the run's minutes include it.
  json final = summary.diverged ? json() : final_evaluation();
  json& s = summary.json;
  s = run_summary(summary.diverged, step_count_, epoch_of(step_count_), folder_.seconds(), to_json(config_));
  s["task"] = config_.task;
  s["training_trees"] = train_rows_.size();
  s["parameters"] = model_.values->numel();
  if (summary.diverged) s["message"] = diverged_;
  if (!folder_.resume_changes().is_null()) s["changed_on_resume"] = folder_.resume_changes();
  if (!last_.is_null()) {
    s["final"] = {{"epoch", last_["epoch"]}, {"dev_root_accuracy", last_["dev_root_accuracy"]},
                  {"test_root_accuracy", last_["test_root_accuracy"]}};
  }
  if (!best_.is_null()) {
    s["best_dev"] = {{"epoch", best_["epoch"]}, {"dev_root_accuracy", best_["dev_root_accuracy"]},
                     {"test_root_accuracy", best_["test_root_accuracy"]}, {"test_node_accuracy", best_["test_node_accuracy"]}};
    s["test_root_accuracy"] = best_["test_root_accuracy"];
    // The run's figure is then the final evaluation's: the paper's test protocol.
    if (!final.is_null()) {
      s["test_root_accuracy"] = final["test_root_accuracy"];
      s["best_dev"]["final_evaluation"] = std::move(final);
    }
  }
  folder_.write_summary(s);
  for (const std::string& problem : write_reports(folder_.dir(), model_)) {
    if (problem.rfind("filters.png", 0) != 0) observer_.on_message(problem);
  }
  return summary;
}

}  // namespace

TreeData load_tree_data(const std::string& dir, const VocabularyPolicy& vocabulary) {
  TreeData d{load_sst(dir), {}};
  d.vocabulary = Vocabulary::from_trees(d.bank.train, vocabulary);
  for (auto* set : {&d.bank.train, &d.bank.dev, &d.bank.test}) d.vocabulary.assign_ids(*set);
  return d;
}

TrainSummary train_trees(const TreeConfig& config, const TreeData& data, const std::string& out_dir,
                         TrainObserver& observer, const Resume& resume) {
  TreeRun run(config, data, out_dir, observer);
  run.start(resume);
  run.run_steps();
  return run.finish();
}

}  // namespace pens
