#include "pens/train/tasks/skipgram.h"

#include <chrono>
#include <cmath>
#include <random>

#include "pens/models/dataset.h"
#include "pens/models/skipgram.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/train/config/config_reader.h"
#include "pens/train/optim/optimizer.h"
#include "pens/train/loop/run_folder.h"
#include "pens/train/loop/step.h"

namespace pens {

using nlohmann::json;

SkipgramConfig parse_skipgram_config(const json& j, const std::string& source) {
  SkipgramConfig c;
  ConfigSection top(j, "", source);
  read_kind(top, "skipgram", source);
  std::string task;
  top.string("task", task);
  if (task != "skipgram") fail(source, ": task must be \"skipgram\" for word-vector pre-training");
  top.string("description", c.description);
  if (const json* d = top.child("data")) read_data_section(*d, source, c.data_dir, c.vocabulary);
  top.number("dim", c.dim, 1, 1e5);
  top.number("window", c.window, 1, 1e3);
  top.number("negatives", c.negatives, 1, 1e3);
  top.number("dropout", c.dropout, 0, 0.99);
  top.number("batch", c.batch, 1, 1e6);
  top.number("learning_rate", c.learning_rate, 0, 1e3);
  top.number("epochs", c.epochs, 1, 1e6);
  top.number("word_std", c.word_std, 1e-6, 1e3);
  top.number("seed", c.seed, 0, kConfigHuge);
  top.number("threads", c.threads, 0, 1024);
  return c;
}

json to_json(const SkipgramConfig& c) {
  return {{"task", "skipgram"}, {"description", c.description},
          {"data", data_section_json(c.data_dir, c.vocabulary)},
          {"dim", c.dim}, {"window", c.window}, {"negatives", c.negatives}, {"dropout", c.dropout},
          {"batch", c.batch}, {"learning_rate", c.learning_rate}, {"epochs", c.epochs},
          {"word_std", c.word_std}, {"seed", c.seed}, {"threads", c.threads}};
}

TrainSummary pretrain_word_vectors(const SkipgramConfig& config, const TreeData& data, const std::string& out_dir,
                                   TrainObserver& observer) {
  const auto start = std::chrono::steady_clock::now();
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
  std::vector<std::pair<int32_t, int32_t>> pairs;  // (centre, context)
  for (const std::vector<int32_t>& s : sentences) {
    for (size_t i = 0; i < s.size(); ++i) {
      const size_t lo = i >= static_cast<size_t>(config.window) ? i - static_cast<size_t>(config.window) : 0;
      for (size_t j = lo; j < std::min(s.size(), i + static_cast<size_t>(config.window) + 1); ++j) {
        if (j != i) pairs.emplace_back(s[i], s[j]);
      }
    }
  }
  for (double& c : counts) c = std::pow(c, 0.75);
  std::discrete_distribution<int32_t> unigram(counts.begin(), counts.end());

  Model model;
  model.graph = build_skipgram({data.vocabulary.size(), config.dim, config.dropout});
  model.values = std::make_shared<ParamStore<float>>(model.graph);
  model.values->initialize(model.graph, config.seed);
  const int64_t rows = config.batch * (config.negatives + 1);
  Tape<float> tape(model.graph, *model.values, {.batch = rows});
  auto optimizer = make_optimizer("adagrad", *model.values, {});
  Step step(*model.values, *optimizer, {}, config.seed);
  RunFolder folder(out_dir);
  folder.start_metrics();
  const auto steps_per_epoch = static_cast<int64_t>(pairs.size()) / config.batch;
  observer.on_message(cat("skip-gram: ", sentences.size(), " sentences, ", pairs.size(), " (centre, context) pairs, ",
                          data.vocabulary.size(), " words; ", steps_per_epoch, " steps of ", config.batch, " pairs per epoch"));
  int64_t count = 0;
  for (int64_t epoch = 0; epoch < config.epochs; ++epoch) {
    const std::vector<int64_t> order = permutation(static_cast<int64_t>(pairs.size()), config.seed, 100 + static_cast<uint64_t>(epoch));
    std::mt19937_64 rng(config.seed * 1000003 + static_cast<uint64_t>(epoch));
    double loss_sum = 0;
    for (int64_t s = 0; s < steps_per_epoch; ++s, ++count) {
      const StepResult r = step.run({.step = count, .learning_rate = config.learning_rate, .momentum = 0}, tape,
                                    [&](Tape<float>& t, size_t) {
        TensorView<float> centre = t.input("centre"), candidate = t.input("candidate"), sign = t.input("sign");
        for (int64_t p = 0; p < config.batch; ++p) {
          const auto& [c, x] = pairs[static_cast<size_t>(order[static_cast<size_t>(s * config.batch + p)])];
          for (int64_t k = 0; k <= config.negatives; ++k) {
            const int64_t row = p * (config.negatives + 1) + k;
            centre[row] = static_cast<float>(c);
            candidate[row] = static_cast<float>(k == 0 ? x : unigram(rng));
            sign[row] = k == 0 ? 1.0f : -1.0f;
          }
        }
      });
      if (!r.finite) fail("skip-gram diverged at step ", count, ": ", r.problem);
      loss_sum += r.objective;
      observer.on_step(count + 1, config.epochs * steps_per_epoch, static_cast<double>(count + 1) / static_cast<double>(steps_per_epoch),
                       r.objective, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    const json m = {{"epoch", epoch + 1}, {"step", count}, {"objective", loss_sum / static_cast<double>(steps_per_epoch)}};
    folder.append_metrics(m);
    observer.on_message(cat("epoch ", epoch + 1, ": mean loss ", m["objective"].get<double>()));
  }
  // Scaled to the configured standard deviation (the paper constrains the vectors' norms).
  TensorView<float> E = model.values->value("E");
  const double mean = E.arr().template cast<double>().mean();
  const double sd = std::sqrt((E.arr().template cast<double>() - mean).square().mean());
  E.arr() *= static_cast<float>(config.word_std / std::max(sd, 1e-12));
  folder.save_model(model, "model.json");
  TrainSummary summary;
  summary.json = {{"status", "finished"}, {"epochs", config.epochs}, {"pairs", pairs.size()},
                  {"wall_seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()},
                  {"config", to_json(config)}, {"word_std_before_scaling", sd}};
  folder.write_summary(summary.json);
  return summary;
}

}  // namespace pens
