#include "pens/train/tasks/tree_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "pens/models/dataset.h"
#include "pens/models/treebank_source.h"
#include "pens/models/word_vectors.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/serialization/model_file.h"
#include "pens/train/loop/report.h"
#include "pens/train/loop/run.h"
#include "pens/train/loop/run_loop.h"
#include "pens/train/loop/step.h"
#include "pens/train/optim/groups.h"
#include "pens/train/tasks/trainer.h"
#include "pens/train/tasks/tree_model.h"

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

namespace {

// A tree model's run on a treebank, as a task of the run loop (train/loop/run_loop.h): each
// step takes the next minibatch of the epoch's order of trees and trains it in groups on
// the threads; an evaluation after every epoch measures root and node accuracy on the
// training sample, dev and test.
class TreeTask : public RunTask {
 public:
  TreeTask(const TreeConfig& config, const TreeData& data, TrainObserver& observer, Communicator* communicator);

  // An evaluation after every epoch.
  RunLength length() const override { return run_length_of(config_, steps_per_epoch_, steps_per_epoch_); }
  json config() const override { return to_json(config_); }
  json as_read(const json& config, const std::string& where) const override {
    return to_json(parse_tree_config(config, where));
  }
  Model& model() override { return model_; }
  Optimizer& optimizer() override { return *optimizer_; }
  StepResult step(int64_t step) override;
  json evaluate(int64_t done, const TrainingWindow& window) override;
  void finishing(const RunFolder& folder, const json& best) override;
  void summarize(json& summary, const json& last, const json& best) const override;

 private:
  // Evaluation's noise seed (subspace draws), apart from training's.
  uint64_t eval_seed() const { return config_.seed + 0x5eed; }
  double epoch_of(int64_t step) const { return static_cast<double>(step) / static_cast<double>(steps_per_epoch_); }
  bool has_penalties() const { return model_.ensemble && !model_.ensemble->penalties.empty(); }
  // The word tables' rows from the vectors file `path`, for the words it has.
  void start_word_tables(const std::string& path, const Vocabulary& vocabulary);
  // Root and node accuracy on `trees`, this process evaluating its share.
  TreeEvaluation evaluate_set(ParamStore<float>& params, std::span<const SentimentTree> trees, int64_t samples);

  const TreeConfig& config_;
  const TreeData& data_;
  SentimentTask task_;
  TrainObserver& observer_;
  Communicator* comm_;  // null: one process
  int rank_, processes_;
  Model model_;
  std::unique_ptr<TreeModel> trees_;
  // The config's schedule with its periodic restarts and the λ stages (the config's
  // lambda_schedule, else the model's).
  Schedule schedule_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Step> step_;
  std::vector<int64_t> train_rows_;  // trainable training trees
  std::vector<SentimentTree> train_eval_;
  int64_t steps_per_epoch_ = 0;
  // The step's trees and graphs, and the epoch whose order of trees `order_` is.
  TreeStepGraphs step_graphs_;
  std::vector<const SentimentTree*> members_;
  std::vector<uint64_t> examples_;
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
  int64_t window_nodes_ = 0;  // training nodes since the last evaluation
  json final_ = nullptr;      // finishing()'s evaluation with eval.final_samples draws
};

TreeTask::TreeTask(const TreeConfig& config, const TreeData& data, TrainObserver& observer, Communicator* communicator)
    : config_(config),
      data_(data),
      task_(parse_sentiment_task(config.task)),
      observer_(observer),
      comm_(communicator && communicator->size() > 1 ? communicator : nullptr),
      rank_(comm_ ? comm_->rank() : 0),
      processes_(comm_ ? comm_->size() : 1) {
  set_threads(config.threads);
  model_ = load_configured_model(config.source, config.model, config.model_patch);
  try {
    trees_ = std::make_unique<TreeModel>(model_, task_, 1.0 / static_cast<double>(config.batch_trees));
  } catch (const Error& e) {
    fail(config.source.empty() ? "" : config.source + ": ", "model ", config.model, ": ", e.what());
  }
  schedule_ = config.schedule;
  schedule_.restarts = periodic_restarts(config.restart_every_epochs, config.restart_before_epoch, config.epochs);
  if (model_.ensemble) schedule_.lambda_stages = config.lambda_schedule.value_or(model_.ensemble->lambda_schedule);
  if (config.lambda_schedule && !has_penalties()) {
    fail(config.source.empty() ? "" : config.source + ": ", "lambda_schedule: ", config.model,
         " has no pseudo-ensemble penalty whose λ it could scale");
  }
  if (const std::string loaded = start_values(model_, config.init_seed, config.init_from); !loaded.empty()) {
    observer.on_message(loaded);
  }
  ParamStore<float>& params = *model_.values;
  // The word tables: the parameters the cell looks up by its words port, whatever their names.
  for (const std::string& table : trees_->word_tables()) {
    if (const int64_t rows = params.at(table).shape[0]; rows != data.vocabulary.size()) {
      fail(config.model, ": ", table, " has ", rows, " rows but the vocabulary of ", config.data_dir, " with min_count ",
           config.vocabulary.min_count, config.vocabulary.lowercase ? " (lowercased)" : "", " has ",
           data.vocabulary.size(), " words (pens new ctn --vocabulary ", data.vocabulary.size(), ")");
    }
  }
  if (!config.word_vectors.empty()) start_word_tables(config.word_vectors, data.vocabulary);
  // Every tree fits the cell: no node has more children than the cell has child ports.
  const auto ports = static_cast<int64_t>(model_.tree->children.size());
  const std::pair<const char*, const std::vector<SentimentTree>*> sets[] = {
      {"training", &data.bank.train}, {"dev", &data.bank.dev}, {"test", &data.bank.test}};
  for (const auto& [name, trees] : sets) {
    for (const SentimentTree& tree : *trees) {
      if (const int64_t arity = tree.shape.arity(); arity > ports) {
        fail(config.data_dir, ": a ", name, " tree (line ", tree.line, ") has a node of ", arity, " children but ",
             config.model, "'s cell has ", ports, " child port", ports == 1 ? "" : "s");
      }
    }
  }
  if (config.freeze_words_epochs > 0 && trees_->word_tables().empty()) {
    fail(config.source.empty() ? "" : config.source + ": ", "freeze_words_epochs: ", config.model,
         " has no word table (a parameter its cell looks up by the words port) to freeze");
  }
  optimizer_ = make_optimizer_with_groups(config.optimizer, config.optimizer_settings, config.schedule.learning_rate,
                                          config.optimizer_groups, params);
  step_ = std::make_unique<Step>(params, *optimizer_,
                                 model_constraints(model_.graph, params, parse_max_norm_rule(config.max_norm_rule)),
                                 config.seed);
  // ℓ2 on the parameters the config names, then the word tables held still for the first
  // epochs.
  step_->add_transform(std::make_unique<L2Penalty>(params, config.l2));
  if (config.freeze_words_epochs > 0) {
    std::vector<const ParamEntry*> tables;
    for (const std::string& table : trees_->word_tables()) tables.push_back(&params.at(table));
    step_->add_transform(std::make_unique<HoldParameters>(std::move(tables), 0.0, config.freeze_words_epochs));
  }
  for (auto& t : make_transforms(config.transforms, params, "optimizer.transforms")) step_->add_transform(std::move(t));
  step_->set_communicator(comm_);
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
                          " steps per epoch; optimizer ", config.optimizer, describe_groups(config.optimizer_groups),
                          trees_->samples_subspaces() ? cat("; evaluation averages ", config.eval_samples, " subspace draws")
                                                      : std::string("; evaluation by the clean parent"),
                          processes_ > 1 ? cat("; ", processes_, " processes, each computing its share of every "
                                               "step's trees and of every evaluation")
                                         : std::string()));
}

StepResult TreeTask::step(int64_t step) {
  const int64_t epoch = step / steps_per_epoch_;
  if (epoch != order_epoch_) {  // each epoch visits the trees in its own order
    order_ = permutation(static_cast<int64_t>(train_rows_.size()), config_.seed, 1000 + static_cast<uint64_t>(epoch));
    order_epoch_ = epoch;
  }
  const auto batch = static_cast<size_t>(config_.batch_trees);
  const size_t first = static_cast<size_t>(step % steps_per_epoch_) * batch;
  const size_t count = std::min(batch, order_.size() - first);
  members_.clear(), examples_.clear();
  const Share mine = share_of(count, rank_, processes_);
  for (size_t i = 0; i < count; ++i) {
    const auto index = static_cast<size_t>(train_rows_[static_cast<size_t>(order_[first + i])]);
    window_nodes_ += data_.bank.train[index].size();
    if (i < mine.first || i >= mine.end) continue;
    members_.push_back(&data_.bank.train[index]);
    examples_.push_back(index + 1);
  }
  const PlannedStep planned = planned_step(schedule_, step, steps_per_epoch_);
  if (planned.restart) optimizer_->restart();
  step_graphs_.assign(*trees_, *model_.values, members_, examples_, planned.lambda_scale,
                      static_cast<size_t>(config_.batch_groups));
  OptimizerStep update = planned.update;
  // A tree run keys its noise by the run's step, not by the step since the last restart
  // as a classifier's does (each kind keeps the draws its runs were made with).
  update.step = step;
  return step_graphs_.run(*step_, update);
}

json TreeTask::evaluate(int64_t done, const TrainingWindow& window) {
  ParamStore<float>& params = *model_.values;
  const Clock::time_point eval_start = Clock::now();
  const TreeEvaluation train = evaluate_set(params, train_eval_, config_.eval_samples);
  const TreeEvaluation dev = evaluate_set(params, data_.bank.dev, config_.eval_samples);
  const TreeEvaluation test = evaluate_set(params, data_.bank.test, config_.eval_samples);
  int64_t eval_nodes = 0;
  for (const std::vector<SentimentTree>* set : {&std::as_const(train_eval_), &data_.bank.dev, &data_.bank.test}) {
    for (const SentimentTree& t : *set) eval_nodes += t.size();
  }
  const double eval_seconds = seconds_since(eval_start);
  json m = {{"step", done},
            {"epoch", epoch_of(done)},
            {"objective", window.objective},
            {"train_root_accuracy", train.root_accuracy()},
            {"dev_root_accuracy", dev.root_accuracy()},
            {"test_root_accuracy", test.root_accuracy()},
            {"dev_node_accuracy", dev.node_accuracy()},
            {"test_node_accuracy", test.node_accuracy()},
            // As errors too: the run loop keeps the best dev epoch's model by its
            // validation error, and the learning curve is MNIST runs'.
            {"train_error", 1 - train.root_accuracy()},
            {"validation_error", 1 - dev.root_accuracy()},
            {"test_error", 1 - test.root_accuracy()},
            {"test_confusion", test.confusion},
            {"train_nodes_per_second", static_cast<double>(window_nodes_) / std::max(1e-9, window.seconds)},
            {"eval_nodes_per_second", static_cast<double>(eval_nodes) / std::max(1e-9, eval_seconds)}};
  // The scale of the penalties' λ in the step just taken.
  if (has_penalties()) m["lambda_scale"] = schedule_.lambda_scale_at(epoch_of(done - 1));
  observer_.on_message(cat("epoch ", epoch_of(done), ": objective ", window.objective, ", root accuracy train ",
                           train.root_accuracy(), " dev ", dev.root_accuracy(), " test ", test.root_accuracy(), " (",
                           std::lround(m["train_nodes_per_second"].get<double>()), " nodes/s training)"));
  window_nodes_ = 0;
  return m;
}

void TreeTask::start_word_tables(const std::string& path, const Vocabulary& vocabulary) {
  ParamStore<float>& params = *model_.values;
  const std::vector<std::string> tables = trees_->word_tables();
  if (tables.empty()) {
    fail(config_.source.empty() ? "" : config_.source + ": ", "word_vectors: ", config_.model,
         " has no word table (a parameter its cell looks up by the words port) to start");
  }
  for (const std::string& table : tables) {
    const WordVectorsLoaded loaded = load_word_vectors(path, vocabulary, params.value(table));
    observer_.on_message(cat("word vectors: ", loaded.words, " of the ", vocabulary.size() - 1, " words of ", table,
                             " from ", path, " (", loaded.lines, " vectors); the others keep their initial values"));
  }
  // Moving averages of a word table (a teacher's) start at its new rows; the others keep theirs.
  std::vector<std::string> kept;
  for (const MovingAverage& a : model_.graph.averages()) {
    if (std::find(tables.begin(), tables.end(), a.source) == tables.end()) kept.push_back(a.param);
  }
  params.start_averages_at_sources(model_.graph, kept);
}

TreeEvaluation TreeTask::evaluate_set(ParamStore<float>& params, std::span<const SentimentTree> trees,
                                      int64_t samples) {
  const Share mine = share_of(trees.size(), rank_, processes_);
  TreeEvaluation e = trees_->evaluate(params, trees.subspan(mine.first, mine.end - mine.first), samples, eval_seed(), 64,
                                      false, mine.first);
  if (!comm_) return e;
  // The processes' counts add up to the whole set's.
  std::vector<double> counts = {static_cast<double>(e.roots), static_cast<double>(e.roots_right),
                                static_cast<double>(e.nodes), static_cast<double>(e.nodes_right)};
  for (const std::vector<int64_t>& row : e.confusion) counts.insert(counts.end(), row.begin(), row.end());
  comm_->sum(counts);
  e.roots = std::llround(counts[0]), e.roots_right = std::llround(counts[1]);
  e.nodes = std::llround(counts[2]), e.nodes_right = std::llround(counts[3]);
  size_t at = 4;
  for (std::vector<int64_t>& row : e.confusion) {
    for (int64_t& c : row) c = std::llround(counts[at++]);
  }
  return e;
}

// The best-dev model (best.model.json, so that a resumed run finds it too) on dev and test
// with eval.final_samples subspace draws; none for a model without subspace sampling, or
// when the epochs' evaluations used as many draws.
void TreeTask::finishing(const RunFolder& folder, const json& best) {
  const int64_t samples = config_.final_samples;
  if (best.is_null() || !trees_->samples_subspaces() || samples <= 0 || samples == config_.eval_samples) return;
  const Model best_model = load_model(folder.path("best.model.json"));
  const TreeEvaluation dev = evaluate_set(*best_model.values, data_.bank.dev, samples);
  const TreeEvaluation test = evaluate_set(*best_model.values, data_.bank.test, samples);
  observer_.on_message(cat("the best dev epoch's model (epoch ", best["epoch"].get<double>(), ") with ", samples,
                           " subspace draws: root accuracy dev ", dev.root_accuracy(), " test ", test.root_accuracy()));
  final_ = {{"samples", samples},
            {"dev_root_accuracy", dev.root_accuracy()},
            {"test_root_accuracy", test.root_accuracy()},
            {"test_node_accuracy", test.node_accuracy()},
            {"test_confusion", test.confusion}};
}

void TreeTask::summarize(json& s, const json& last, const json& best) const {
  s["task"] = config_.task;
  s["training_trees"] = train_rows_.size();
  if (!last.is_null()) {
    s["final"] = {{"epoch", last["epoch"]}, {"dev_root_accuracy", last["dev_root_accuracy"]},
                  {"test_root_accuracy", last["test_root_accuracy"]}};
  }
  if (!best.is_null()) {
    s["best_dev"] = {{"epoch", best["epoch"]}, {"dev_root_accuracy", best["dev_root_accuracy"]},
                     {"test_root_accuracy", best["test_root_accuracy"]}, {"test_node_accuracy", best["test_node_accuracy"]}};
    s["test_root_accuracy"] = best["test_root_accuracy"];
    // The run's figure is then the final evaluation's: the paper's test protocol.
    if (!final_.is_null()) {
      s["test_root_accuracy"] = final_["test_root_accuracy"];
      s["best_dev"]["final_evaluation"] = final_;
    }
  }
}

}  // namespace

TreeData load_tree_data(const std::string& source, const std::string& dir, const Attributes& settings,
                        const VocabularyPolicy& vocabulary) {
  TreeData d{load_treebank(source, dir, settings), {}};
  d.vocabulary = Vocabulary::from_trees(d.bank.train, vocabulary);
  for (auto* set : {&d.bank.train, &d.bank.dev, &d.bank.test}) d.vocabulary.assign_ids(*set);
  return d;
}

std::string PreparedTrees::description() const {
  return cat(config.model, " on ", config.data_dir, " (", config.task, ") for ", config.epochs, " epochs",
             budget_text(config.budget_minutes), ", ", threads_text(config.threads));
}

TrainSummary PreparedTrees::train(const std::string& out_dir, TrainObserver& observer, const Resume& resume,
                                  Communicator* communicator) const {
  return train_trees(config, data, out_dir, observer, resume, communicator);
}

std::vector<std::string> PreparedTrees::results(const json& s) const {
  std::vector<std::string> lines;
  if (!s.contains("best_dev")) return lines;
  const json& b = s["best_dev"];
  lines.push_back(cat("test root accuracy ", percent_text(b["test_root_accuracy"]), " at the best dev root accuracy (",
                      percent_text(b["dev_root_accuracy"]), ", epoch ", b["epoch"].get<double>(), ")"));
  if (b.contains("final_evaluation")) {
    const json& f = b["final_evaluation"];
    lines.push_back(cat("test root accuracy ", percent_text(f["test_root_accuracy"]), " with ",
                        f["samples"].get<int64_t>(), " subspace draws, the same model (dev ",
                        percent_text(f["dev_root_accuracy"]), ")"));
  }
  return lines;
}

RunKind tree_run_kind() {
  return {.name = "trees",
          .summary = "a tree model on a treebank (data.source: a treebank source, the SST's by default)",
          .prepare = [](const std::string& config_path, const json& j, const RunOptions& options,
                        std::optional<GivenData> given) -> std::unique_ptr<PreparedTask> {
            if (given) fail(config_path, " is a tree config: data given as arrays is for dense (MNIST-like) configs");
            if (options.labels) fail("labels is for dense configs; ", config_path, " is a tree config");
            if (options.split_seed) fail("split_seed is for dense configs; ", config_path, " is a tree config");
            if (options.shards) fail("shards is for dense configs; ", config_path, " is a tree config");
            if (options.precision) fail("precision is for dense configs; ", config_path, " is a tree config");
            auto run = std::make_unique<PreparedTrees>();
            run->config = parse_tree_config(j, config_path);
            apply_run_options(options, config_path, j, run->config);
            run->config.word_vectors = relative_to_config(config_path, run->config.word_vectors);
            const TreeConfig& c = run->config;
            run->data = load_tree_data(c.data_source, c.data_dir, c.data_settings, c.vocabulary);
            return run;
          }};
}

TrainSummary train_trees(const TreeConfig& config, const TreeData& data, const std::string& out_dir,
                         TrainObserver& observer, const Resume& resume, Communicator* communicator) {
  return run_task([&] { return std::make_unique<TreeTask>(config, data, observer, communicator); }, out_dir, observer,
                  resume, communicator);
}

}  // namespace pens
