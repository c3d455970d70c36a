#include "pens/train/tasks/skipgram.h"

#include <cmath>
#include <memory>
#include <random>

#include "pens/models/dataset.h"
#include "pens/models/skipgram.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/train/config/config_reader.h"
#include "pens/train/loop/run_loop.h"
#include "pens/train/loop/step.h"
#include "pens/train/optim/optimizer.h"

namespace pens {

using nlohmann::json;

namespace {

// The config's top-level fields (config_reader.h): read by parse_skipgram_config, written by to_json.
const ConfigField<SkipgramConfig> kSkipgramFields[] = {
    {"description", &SkipgramConfig::description},
    {"dim", &SkipgramConfig::dim, 1, 1e5},
    {"window", &SkipgramConfig::window, 1, 1e3},
    {"negatives", &SkipgramConfig::negatives, 1, 1e3},
    {"dropout", &SkipgramConfig::dropout, 0, 0.99},
    {"batch", &SkipgramConfig::batch, 1, 1e6},
    {"learning_rate", &SkipgramConfig::learning_rate, 0, 1e3},
    {"epochs", &SkipgramConfig::epochs, 1, 1e6},
    {"word_std", &SkipgramConfig::word_std, 1e-6, 1e3},
    {"seed", &SkipgramConfig::seed, 0, kConfigHuge},
    {"threads", &SkipgramConfig::threads, 0, 1024},
    {"budget_minutes", &SkipgramConfig::budget_minutes, 0, 1e9}};

}  // namespace

SkipgramConfig parse_skipgram_config(const json& j, const std::string& source) {
  SkipgramConfig c;
  ConfigSection top(j, "", source);
  read_kind(top, "skipgram", source);
  std::string task;
  top.string("task", task);
  if (task != "skipgram") fail(source, ": task must be \"skipgram\" for word-vector pre-training");
  read_fields<SkipgramConfig>(top, c, kSkipgramFields);
  read_data_section(top.child("data"), source, c.data_source, c.data_dir, c.data_settings, c.vocabulary);
  read_checkpoint_section(top, c, source);
  return c;
}

json to_json(const SkipgramConfig& c) {
  json j = {{"task", "skipgram"},
            {"data", data_section_json(c.data_source, c.data_dir, c.data_settings, c.vocabulary)},
            {"checkpoint", checkpoint_section_json(c)}};
  write_fields<SkipgramConfig>(j, c, kSkipgramFields);
  return j;
}

namespace {

// Skip-gram pre-training as a task of the run loop (train/loop/run_loop.h): an evaluation
// after every epoch is the epoch's mean loss; the word vectors are scaled when the model
// is saved, so checkpoints keep the unscaled ones a resumed run continues from.
class SkipgramTask : public RunTask {
 public:
  SkipgramTask(const SkipgramConfig& config, const TreeData& data, TrainObserver& observer);

  // An evaluation (the epoch's mean loss) after every epoch; no best model to keep.
  RunLength length() const override {
    RunLength length = run_length_of(config_, steps_per_epoch_, steps_per_epoch_);
    length.keeps_best = false;
    return length;
  }
  json config() const override { return to_json(config_); }
  json as_read(const json& config, const std::string& where) const override {
    return to_json(parse_skipgram_config(config, where));
  }
  // A skip-gram config keeps its length, budget, threads and learning rate at the top level.
  ResumableFields resumable() const override {
    return {.free = {"/description", "/epochs", "/budget_minutes", "/threads", "/checkpoint/keep"},
            .schedule = {"/learning_rate"}};
  }
  Model& model() override { return model_; }
  Optimizer& optimizer() override { return *optimizer_; }
  StepResult step(int64_t step) override;
  json evaluate(int64_t done, const TrainingWindow& window) override;
  const Model& saved_model() override;
  void summarize(json& summary, const json& last, const json& best) const override;

 private:
  // Readies the draws of `epoch` at step `step`: its order of pairs, and its generator of
  // negatives advanced past the steps of the epoch before `step` (a run resumed within an
  // epoch draws what an unbroken one would).
  void start_epoch(int64_t epoch, int64_t step);

  const SkipgramConfig& config_;
  TrainObserver& observer_;
  std::vector<std::pair<int32_t, int32_t>> pairs_;  // (centre, context)
  std::discrete_distribution<int32_t> unigram_;
  Model model_;
  std::unique_ptr<Tape<float>> tape_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Step> step_;
  int64_t steps_per_epoch_ = 0;
  int64_t epoch_ = -1;
  std::vector<int64_t> order_;
  std::mt19937_64 rng_;
  Model scaled_;        // saved_model(): the vectors scaled to word_std
  double word_sd_ = 0;  // their standard deviation before
};

SkipgramTask::SkipgramTask(const SkipgramConfig& config, const TreeData& data, TrainObserver& observer)
    : config_(config), observer_(observer) {
  set_threads(config.threads);
  // The text: every sentence of train and dev, as vocabulary ids in reading order.
  std::vector<std::vector<int32_t>> sentences;
  std::vector<double> counts(static_cast<size_t>(data.vocabulary.size()), 0.0);
  for (const auto* set : {&data.bank.train, &data.bank.dev}) {
    for (const SentimentTree& t : *set) {
      std::vector<int32_t>& words = sentences.emplace_back();
      for (int64_t i = 0; i < t.size(); ++i) {
        if (!t.is_leaf(i)) continue;
        words.push_back(data.vocabulary.id(t.word[static_cast<size_t>(i)]));
        ++counts[static_cast<size_t>(words.back())];
      }
    }
  }
  for (const std::vector<int32_t>& s : sentences) {
    for (size_t i = 0; i < s.size(); ++i) {
      const size_t lo = i >= static_cast<size_t>(config.window) ? i - static_cast<size_t>(config.window) : 0;
      for (size_t j = lo; j < std::min(s.size(), i + static_cast<size_t>(config.window) + 1); ++j) {
        if (j != i) pairs_.emplace_back(s[i], s[j]);
      }
    }
  }
  for (double& c : counts) c = std::pow(c, 0.75);
  unigram_ = std::discrete_distribution<int32_t>(counts.begin(), counts.end());
  steps_per_epoch_ = static_cast<int64_t>(pairs_.size()) / config.batch;
  if (steps_per_epoch_ < 1) {
    fail(config.data_dir, ": ", pairs_.size(), " (centre, context) pairs, fewer than one batch of ", config.batch);
  }

  model_.graph = build_skipgram({data.vocabulary.size(), config.dim, config.dropout});
  model_.values = std::make_shared<ParamStore<float>>(model_.graph);
  model_.values->initialize(model_.graph, config.seed);
  tape_ = std::make_unique<Tape<float>>(model_.graph, *model_.values,
                                        CompileOptions{.batch = config.batch * (config.negatives + 1)});
  optimizer_ = make_optimizer("adagrad", *model_.values, {});
  step_ = std::make_unique<Step>(*model_.values, *optimizer_, std::vector<std::unique_ptr<Constraint>>{}, config.seed);
  observer.on_message(cat("skip-gram: ", sentences.size(), " sentences, ", pairs_.size(), " (centre, context) pairs, ",
                          data.vocabulary.size(), " words; ", steps_per_epoch_, " steps of ", config.batch,
                          " pairs per epoch"));
}

void SkipgramTask::start_epoch(int64_t epoch, int64_t step) {
  order_ = permutation(static_cast<int64_t>(pairs_.size()), config_.seed, 100 + static_cast<uint64_t>(epoch));
  rng_.seed(config_.seed * 1000003 + static_cast<uint64_t>(epoch));
  // Each negative is one draw of the generator (std::discrete_distribution over doubles
  // from a 64-bit engine), and the distribution keeps no state between draws.
  rng_.discard(static_cast<unsigned long long>((step - epoch * steps_per_epoch_) * config_.batch * config_.negatives));
  epoch_ = epoch;
}

StepResult SkipgramTask::step(int64_t step) {
  const int64_t epoch = step / steps_per_epoch_;
  if (epoch != epoch_) start_epoch(epoch, step);
  const int64_t s = step % steps_per_epoch_;
  return step_->run({.step = step, .learning_rate = config_.learning_rate, .momentum = 0}, *tape_,
                    [&](Tape<float>& t, size_t) {
    TensorView<float> centre = t.input("centre"), candidate = t.input("candidate"), sign = t.input("sign");
    for (int64_t p = 0; p < config_.batch; ++p) {
      const auto& [c, x] = pairs_[static_cast<size_t>(order_[static_cast<size_t>(s * config_.batch + p)])];
      for (int64_t k = 0; k <= config_.negatives; ++k) {
        const int64_t row = p * (config_.negatives + 1) + k;
        centre[row] = static_cast<float>(c);
        candidate[row] = static_cast<float>(k == 0 ? x : unigram_(rng_));
        sign[row] = k == 0 ? 1.0f : -1.0f;
      }
    }
  });
}

json SkipgramTask::evaluate(int64_t done, const TrainingWindow& window) {
  const double epoch = static_cast<double>(done) / static_cast<double>(steps_per_epoch_);
  observer_.on_message(cat("epoch ", epoch, ": mean loss ", window.objective));
  return {{"epoch", epoch}, {"step", done}, {"objective", window.objective}, {"validation_error", nullptr}};
}

// Scaled to the configured standard deviation (the paper constrains the vectors' norms).
const Model& SkipgramTask::saved_model() {
  scaled_ = model_;
  scaled_.values = std::make_shared<ParamStore<float>>(*model_.values);
  TensorView<float> E = scaled_.values->value("E");
  const double mean = E.arr().template cast<double>().mean();
  word_sd_ = std::sqrt((E.arr().template cast<double>() - mean).square().mean());
  E.arr() *= static_cast<float>(config_.word_std / std::max(word_sd_, 1e-12));
  return scaled_;
}

void SkipgramTask::summarize(json& s, const json& /*last*/, const json& /*best*/) const {
  s["pairs"] = pairs_.size();
  s["word_std_before_scaling"] = word_sd_;
}

}  // namespace

TrainSummary pretrain_word_vectors(const SkipgramConfig& config, const TreeData& data, const std::string& out_dir,
                                   TrainObserver& observer, const Resume& resume) {
  return run_task([&] { return std::make_unique<SkipgramTask>(config, data, observer); }, out_dir, observer, resume,
                  nullptr);
}

}  // namespace pens
