// Population statistics for batch normalisation: the statistics graph (build_statistics)
// and StatisticsRecalibration, which replaces running statistics by the mean of training
// batches' statistics under the weights inference reads; the trainer doing so before each
// evaluation (eval.recalibrate_statistics).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <vector>

#include "pens/graph/noise.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/mlp.h"
#include "pens/models/synthetic.h"
#include "pens/models/teacher.h"
#include "pens/serialization/model_file.h"
#include "pens/train/tasks/evaluation.h"
#include "pens/train/tasks/trainer.h"
#include "tests/support/helpers.h"
#include "tests/support/temp_dir.h"

namespace test_recalibration {

using namespace pens;

namespace {

constexpr int64_t kBatchRows = 4;

// 4-5-5-3 with batch norm on both hidden layers.
Graph bn_mlp() { return build_mlp({.layers = {4, 5, 5, 3}, .weight_std = 0.7, .batch_norm = true}); }

// 14 examples of 4 values: three batches of 4 and a ragged 2.
Dataset examples() {
  Dataset d = make_dataset(14, 4, 3, "test examples");
  for (size_t i = 0; i < d.x.size(); ++i) d.x[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i) + 0.3));
  for (int64_t i = 0; i < d.size; ++i) d.y[static_cast<size_t>(i)] = static_cast<float>(i % 3);
  return d;
}

std::vector<int64_t> all_rows(const Dataset& d) {
  std::vector<int64_t> rows(static_cast<size_t>(d.size));
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

// The mean over `rows` of d of x·W, by hand, per column.
std::vector<double> mean_of_product(const Dataset& d, const std::vector<int64_t>& rows, TensorView<const float> w) {
  const int64_t in = w.shape[0], out = w.shape[1];
  std::vector<double> m(static_cast<size_t>(out), 0.0);
  for (int64_t r : rows) {
    for (int64_t j = 0; j < out; ++j) {
      double a = 0;
      for (int64_t k = 0; k < in; ++k) a += double(d.x[static_cast<size_t>(r * in + k)]) * w[k * out + j];
      m[static_cast<size_t>(j)] += a / static_cast<double>(rows.size());
    }
  }
  return m;
}

// The rows of batch b when the examples are taken in order.
std::vector<int64_t> batch_rows(int64_t b) {
  std::vector<int64_t> rows(kBatchRows);
  std::iota(rows.begin(), rows.end(), b * kBatchRows);
  return rows;
}

}  // namespace

TEST_CASE("population statistics: the mean of full batches' statistics, each batch normalised by its own") {
  const Graph g = bn_mlp();
  ParamStore<float> values(g);
  values.initialize(g, 5);
  // Running statistics far from anything: nothing below may read them.
  for (const char* p : {"bn1/running_mean", "bn2/running_mean"}) std::fill_n(values.value(p).data, 5, 100.0f);
  const Dataset d = examples();
  StatisticsRecalibration recalibrate(g, values, kBatchRows);
  CHECK(recalibrate.run(d, all_rows(d)) == 3);  // the ragged 2 rows are not a batch

  // bn1's mean by hand: the first layer's x·W1 averaged over each batch, then over batches.
  std::vector<double> expected(5, 0.0);
  for (int64_t b = 0; b < 3; ++b) {
    const std::vector<double> m = mean_of_product(d, batch_rows(b), values.value("W1"));
    for (size_t j = 0; j < 5; ++j) expected[j] += m[j] / 3;
  }
  for (size_t j = 0; j < 5; ++j) CHECK(values.value("bn1/running_mean")[static_cast<int64_t>(j)] == doctest::Approx(expected[j]).epsilon(1e-5));

  // bn2's statistics are those of the training-mode network on each batch: compiled as
  // the parent graph, batch by batch.
  Tape<float> parent(g, values, {.batch = kBatchRows});
  std::vector<double> mean2(5, 0.0), var2(5, 0.0);
  for (int64_t b = 0; b < 3; ++b) {
    std::copy_n(d.x.data() + b * kBatchRows * 4, kBatchRows * 4, parent.input("x").data);
    parent.forward();
    for (int64_t j = 0; j < 5; ++j) {
      mean2[static_cast<size_t>(j)] += parent.value("bn2/mean")[j] / 3.0;
      var2[static_cast<size_t>(j)] += parent.value("bn2/var")[j] / 3.0;
    }
  }
  for (int64_t j = 0; j < 5; ++j) {
    CHECK(values.value("bn2/running_mean")[j] == doctest::Approx(mean2[static_cast<size_t>(j)]).epsilon(1e-5));
    CHECK(values.value("bn2/running_var")[j] == doctest::Approx(var2[static_cast<size_t>(j)]).epsilon(1e-5));
  }
  // A second run over the same rows gives the same statistics: the sums start afresh.
  const std::vector<float> once(values.value("bn2/running_var").data, values.value("bn2/running_var").data + 5);
  recalibrate.run(d, all_rows(d));
  CHECK(std::equal(once.begin(), once.end(), values.value("bn2/running_var").data));
}

TEST_CASE("population statistics: measured with the weights inference reads, a teacher's when it has one") {
  Graph g = bn_mlp();
  add_teacher(g, 0.9);
  ParamStore<float> values(g);
  values.initialize(g, 5);
  // A teacher unlike its student: twice the first layer's weights.
  for (int64_t i = 0; i < values.value("W1").size(); ++i) values.value("teacher/W1")[i] = 2 * values.value("W1")[i];

  const Graph statistics = build_statistics(g);
  CHECK(statistics.find("teacher/W1"));
  CHECK_FALSE(statistics.find("W1"));
  CHECK(statistics[statistics.at("bn1/mean")].has(kOutput));
  CHECK_FALSE(statistics.find("y"));  // no loss, so no labels

  const Dataset d = examples();
  StatisticsRecalibration recalibrate(g, values, kBatchRows);
  recalibrate.run(d, batch_rows(2));
  const std::vector<double> teacher = mean_of_product(d, batch_rows(2), values.value("teacher/W1"));
  for (int64_t j = 0; j < 5; ++j) CHECK(values.value("bn1/running_mean")[j] == doctest::Approx(teacher[static_cast<size_t>(j)]).epsilon(1e-5));
}

TEST_CASE("population statistics: what cannot be recalibrated is an error that says why") {
  const Graph plain = build_mlp({.layers = {4, 5, 3}});
  CHECK_ERROR_MENTIONS(build_statistics(plain), "no moving average of a batch statistic");
  const Graph g = bn_mlp();
  ParamStore<float> values(g);
  values.initialize(g, 5);
  StatisticsRecalibration recalibrate(g, values, kBatchRows);
  CHECK_ERROR_MENTIONS(recalibrate.run(examples(), std::vector<int64_t>{0, 1, 2}), "at least one batch of 4", "got 3");
  CHECK_ERROR_MENTIONS(
      parse_train_config(nlohmann::json::parse(R"({"model": "m.json", "eval": {"recalibrate_statistics": -1}})"), "c.json"),
      "eval.recalibrate_statistics");
}

TEST_CASE("a run with eval.recalibrate_statistics evaluates and saves the population statistics of its last weights") {
  testing::TempDir dir;
  Model m;
  m.graph = build_mlp({.layers = {16, 24, 4}, .weight_std = 0.3, .batch_norm = true});
  add_noise(m.graph, m.graph.at("x"), "gaussian", {{"sigma", 0.1}});
  m.ensemble = PseudoEnsembleSpec{.children = 1, .pairing = "parent-child", .loss_on = "parent",
                                  .penalties = {{"logits", "kl", 1.0, "all"}}, .lambda_schedule = {}};
  const std::string model = dir / "bn.model.json";
  save_model(m, model, ValueStorage::None);
  TrainConfig c;
  c.model = model;
  c.labeled = 100;
  c.validation = 100;
  c.batch_labeled = 8;
  c.batch_unlabeled = 8;
  c.optimizer = "adam";
  c.schedule.learning_rate = 0.003;
  c.epochs = 2;
  c.steps_per_epoch = 20;
  c.threads = 1;
  c.eval_batch = 50;
  c.recalibrate_statistics = 1000000;  // the whole pool
  // 612 examples, 100 of them validation: a pool of 512, 32 full batches of 16.
  const TrainData data{make_teacher_task(612, 16, 4, 1), make_teacher_task(200, 16, 4, 2)};
  struct : TrainObserver {
    std::vector<std::string> messages;
    void on_message(const std::string& text) override { messages.push_back(text); }
  } quiet;
  REQUIRE_FALSE(train(c, data, dir / "run", quiet).diverged);
  CHECK(std::any_of(quiet.messages.begin(), quiet.messages.end(), [](const std::string& s) {
    return s.find("running statistics from 32 batches of 16 training examples") != std::string::npos;
  }));

  // The last evaluation follows the last update, so the saved running mean of bn1 is the
  // population's under the saved weights: the mean of x·W1 over the whole pool (the
  // batches are a shuffle of it, all full, so their order does not matter).
  const Model trained = load_model(dir / "run/model.json");
  REQUIRE(trained.values);
  const Split split = semi_supervised_split(data.train, 100, 100, c.split_seed);
  std::vector<char> in_pool(612, 1);
  for (int64_t r : split.validation) in_pool[static_cast<size_t>(r)] = 0;
  std::vector<int64_t> pool;
  for (int64_t r = 0; r < 612; ++r) {
    if (in_pool[static_cast<size_t>(r)]) pool.push_back(r);
  }
  REQUIRE(pool.size() == 512);
  const std::vector<double> expected = mean_of_product(data.train, pool, trained.values->value("W1"));
  for (int64_t j = 0; j < 24; ++j) {
    CHECK(trained.values->value("bn1/running_mean")[j] == doctest::Approx(expected[static_cast<size_t>(j)]).epsilon(1e-4));
  }
}

}  // namespace test_recalibration
