// Batch normalisation and the moving averages behind its running statistics: the block's
// values and gradients, the Step keeping the averages of the clean pass's statistics,
// inference reading them, model files keeping them, and what refuses them.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "pens/autodiff/gradcheck.h"
#include "pens/autodiff/tape.h"
#include "pens/graph/noise.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/batch_norm.h"
#include "pens/models/mlp.h"
#include "pens/serialization/model_file.h"
#include "pens/train/loop/step.h"
#include "pens/train/optim/optimizer.h"
#include "tests/support/helpers.h"

namespace test_batch_norm {

using namespace pens;

namespace {

constexpr int64_t kRows = 6;

Graph bn_mlp() { return build_mlp({.layers = {4, 5, 3}, .weight_std = 0.7, .batch_norm = true}); }

// The same with Gaussian noise on x for the children.
Graph noisy_bn_mlp() {
  Graph g = bn_mlp();
  add_noise(g, g.at("x"), "gaussian", {{"sigma", 0.5}});
  return g;
}

template <class T>
void feed_x(Tape<T>& tape) {
  auto x = tape.input("x");
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(std::sin(0.9 * static_cast<double>(i) + 0.4));
}

template <class T>
void feed(Tape<T>& tape, size_t = 0) {
  feed_x(tape);
  auto y = tape.input("y");
  for (int64_t i = 0; i < y.size(); ++i) y[i] = static_cast<T>(i % 3);
}

std::vector<double> column_means(TensorView<const double> v) {
  const int64_t rows = v.shape[0], cols = v.shape[1];
  std::vector<double> m(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) m[static_cast<size_t>(c)] += v[r * cols + c] / static_cast<double>(rows);
  }
  return m;
}

}  // namespace

TEST_CASE("batch norm: each feature of the batch normalised, then scaled and shifted") {
  const Graph g = bn_mlp();
  ParamStore<double> params(g);
  params.initialize(g, 3);
  auto scale = params.value("bn1/scale");
  auto shift = params.value("bn1/shift");
  for (int64_t j = 0; j < 5; ++j) {
    scale[j] = 0.5 + 0.25 * static_cast<double>(j);
    shift[j] = -0.3 * static_cast<double>(j);
  }
  Tape<double> tape(g, params, {.batch = kRows});
  feed(tape);
  tape.forward();
  const TensorView<const double> a = tape.value("a1"), n = tape.value("bn1");
  const std::vector<double> mean_a = column_means(a), mean_n = column_means(n);
  for (int64_t j = 0; j < 5; ++j) {
    double var_a = 0, var_n = 0;
    for (int64_t r = 0; r < kRows; ++r) {
      var_a += std::pow(a[r * 5 + j] - mean_a[static_cast<size_t>(j)], 2) / kRows;
      var_n += std::pow(n[r * 5 + j] - mean_n[static_cast<size_t>(j)], 2) / kRows;
    }
    CHECK(tape.value("bn1/mean")[j] == doctest::Approx(mean_a[static_cast<size_t>(j)]).epsilon(1e-12));
    CHECK(tape.value("bn1/var")[j] == doctest::Approx(var_a).epsilon(1e-12));
    CHECK(mean_n[static_cast<size_t>(j)] == doctest::Approx(shift[j]).epsilon(1e-12));
    CHECK(var_n == doctest::Approx(scale[j] * scale[j] * var_a / (var_a + 1e-5)).epsilon(1e-10));
  }
}

TEST_CASE("batch norm: finite-difference gradients through the batch statistics") {
  // Every row's output depends on every row's input through the mean and the variance:
  // the check covers the three ops together (each also has its own cases).
  const Graph g = bn_mlp();
  GradcheckOptions options;
  options.batch = 4;
  const GradcheckResult r = gradcheck(g, label_values(g, 4), options);
  INFO(r.worst);
  CHECK(r.passed);
  CHECK(r.nonzero > 50);
}

TEST_CASE("moving averages: the Step follows the clean pass's batch statistics after each update") {
  // Children see Gaussian noise on x; the loss is on child 1 and the children agree, so
  // nothing but the running statistics reads the clean parent: it is kept for them.
  const Graph parent = noisy_bn_mlp();
  PseudoEnsembleSpec spec;
  spec.children = 2;
  spec.loss_on = "child";
  spec.penalties = {{"logits", "l2", 1.0}};
  const PseudoEnsemble e = build_pseudo_ensemble(parent, spec);
  REQUIRE(e.graph.averages().size() == 2);
  CHECK(e.graph.find("bn1/mean"));
  CHECK(e.graph[e.graph.at("bn1/mean")].role == "parent");

  ParamStore<float> params(parent);
  params.initialize(parent, 1);
  const auto sgd = make_optimizer("sgd", params);
  Step step(params, *sgd, {}, 7);
  Tape<float> tape(e.graph, params, {.batch = kRows});
  std::vector<float> mean(5, 0.0f), var(5, 1.0f);
  for (int64_t s = 0; s < 3; ++s) {
    const std::vector<float> w_before(params.value("W1").data, params.value("W1").data + 20);
    REQUIRE(step.run({.step = s, .learning_rate = 0.1}, tape, feed<float>).finite);
    // The forward pass ran on the weights before the update: its statistics are those
    // the averages took in.
    for (int64_t j = 0; j < 5; ++j) {
      mean[static_cast<size_t>(j)] = 0.99f * mean[static_cast<size_t>(j)] + 0.01f * tape.value("bn1/mean")[j];
      var[static_cast<size_t>(j)] = 0.99f * var[static_cast<size_t>(j)] + 0.01f * tape.value("bn1/var")[j];
      CHECK(params.value("bn1/running_mean")[j] == doctest::Approx(mean[static_cast<size_t>(j)]).epsilon(1e-6));
      CHECK(params.value("bn1/running_var")[j] == doctest::Approx(var[static_cast<size_t>(j)]).epsilon(1e-6));
      // The children's statistics differ (their inputs are noisy): not those.
      CHECK(std::abs(tape.value("c1/bn1/mean")[j] - tape.value("bn1/mean")[j]) > 1e-4);
    }
    CHECK(params.value("W1")[0] != w_before[0]);  // the update happened too
  }
  CHECK(params.value("bn1/running_mean")[0] != 0.0f);
}

TEST_CASE("moving averages: inference reads the running statistics, each row on its own") {
  const Graph g = bn_mlp();
  ParamStore<double> params(g);
  params.initialize(g, 5);
  for (int64_t j = 0; j < 5; ++j) {
    params.value("bn1/running_mean")[j] = 0.1 * static_cast<double>(j) - 0.2;
    params.value("bn1/running_var")[j] = 0.5 + 0.3 * static_cast<double>(j);
  }
  const Graph inference = build_inference(g);
  CHECK_FALSE(inference.find("bn1/var"));
  CHECK(inference.averages().empty());
  CHECK(inference[inference.at("bn1")].op->name == "normalize");
  Tape<double> batch(inference, params, {.batch = kRows});
  feed_x(batch);
  batch.forward();
  // Row r alone gives what it gives in the batch: nothing depends on the other rows.
  Tape<double> one(inference, params, {.batch = 1});
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < 4; ++c) one.input("x")[c] = batch.value("x")[r * 4 + c];
    one.forward();
    for (int64_t k = 0; k < 3; ++k) CHECK(one.value("logits")[k] == doctest::Approx(batch.value("logits")[r * 3 + k]).epsilon(1e-12));
  }
  // And it is the running statistics that normalise: a by hand.
  const TensorView<const double> a = batch.value("a1"), n = batch.value("bn1");
  for (int64_t j = 0; j < 5; ++j) {
    const double expected = (a[j] - params.value("bn1/running_mean")[j]) /
                                std::sqrt(params.value("bn1/running_var")[j] + 1e-5) * params.value("bn1/scale")[j] +
                            params.value("bn1/shift")[j];
    CHECK(n[j] == doctest::Approx(expected).epsilon(1e-12));
  }
}

TEST_CASE("moving averages: model files keep them; bad ones are named") {
  Model model;
  model.graph = bn_mlp();
  const std::string text = write_model(model, ValueStorage::None, "").json;
  const Model back = parse_model(text, "bn.json", ".");
  CHECK(back.graph.averages() == model.graph.averages());
  CHECK(back.graph.averages().size() == 2);

  const auto with = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    REQUIRE(at != std::string::npos);
    t.replace(at, from.size(), to);
    return t;
  };
  CHECK_ERROR_MENTIONS(parse_model(with("\"source\": \"bn1/mean\"", "\"source\": \"bn9/mean\""), "bn.json", "."),
                       "/moving_averages/0", "no node named 'bn9/mean'");
  CHECK_ERROR_MENTIONS(parse_model(with("\"source\": \"bn1/mean\"", "\"source\": \"a1\""), "bn.json", "."),
                       "/moving_averages/0", "free of the batch");
  CHECK_ERROR_MENTIONS(parse_model(with("\"source\": \"bn1/mean\"", "\"source\": \"b2\""), "bn.json", "."),
                       "/moving_averages/0", "the source's value is [3], the parameter [5]");
  CHECK_ERROR_MENTIONS(parse_model(with("\"param\": \"bn1/running_mean\"", "\"param\": \"bn1/scale\""), "bn.json", "."),
                       "/moving_averages/0", "'bn1/scale' must be a parameter marked frozen");
  CHECK_ERROR_MENTIONS(parse_model(with("\"param\": \"bn1/running_var\"", "\"param\": \"bn1/running_mean\""), "bn.json", "."),
                       "/moving_averages/1", "already holds another average");
  CHECK_ERROR_MENTIONS(parse_model(with("\"decay\": 0.99", "\"decay\": 1.0"), "bn.json", "."), "/moving_averages/0",
                       "decay 1 is outside [0, 1)");
}

TEST_CASE("moving averages of batch statistics: a sharded step refuses them") {
  const Graph g = bn_mlp();
  ParamStore<float> params(g);
  params.initialize(g, 1);
  const auto sgd = make_optimizer("sgd", params);
  Step step(params, *sgd);
  Tape<float> tape(g, params, {.batch = kRows});
  CHECK(tape.averages_batch_values());
  CHECK_ERROR_MENTIONS(step.run_shards({.step = 0, .learning_rate = 0.1}, tape, 2, 0, 2,
                                       [](Tape<float>& t, size_t) { feed(t); }),
                       "moving averages of batch statistics", "sharded");
}

TEST_CASE("batch statistics: children normalise with their own batch's, or with the clean parent's held constant") {
  const Graph parent = noisy_bn_mlp();
  PseudoEnsembleSpec spec;
  spec.children = 1;
  spec.pairing = "parent-child";
  spec.penalties = {{"logits", "kl", 1.0, "all", true}};
  const Graph own = build_pseudo_ensemble(parent, spec).graph;
  CHECK(own.find("c1/bn1/mean"));
  spec.batch_statistics = {"parent"};
  const Graph shared = build_pseudo_ensemble(parent, spec).graph;
  CHECK_FALSE(shared.find("c1/bn1/mean"));
  const std::vector<NodeId> in = shared.inputs(shared.at("c1/bn1"));
  REQUIRE(in.size() == 5);
  CHECK(shared[in[1]].name == "bn1/mean~parent");
  CHECK(shared[in[1]].op->name == "stop_gradient");
  CHECK(shared[shared.inputs(in[1])[0]].name == "bn1/mean");
  CHECK(shared[in[2]].name == "bn1/var~parent");

  // The child's values: its own pre-activations, the parent's statistics.
  ParamStore<double> params(parent);
  params.initialize(parent, 2);
  Tape<double> tape(shared, params, {.batch = kRows});
  feed(tape);
  tape.forward();
  const TensorView<const double> a = tape.value("c1/a1"), n = tape.value("c1/bn1");
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t j = 0; j < 5; ++j) {
      const double expected = (a[r * 5 + j] - tape.value("bn1/mean")[j]) / std::sqrt(tape.value("bn1/var")[j] + 1e-5);
      CHECK(n[r * 5 + j] == doctest::Approx(expected).epsilon(1e-12));
    }
  }
  spec.batch_statistics = {"children"};
  CHECK_ERROR_MENTIONS(spec.validate(), "batch_statistics must be 'own' or 'parent'");
}

}  // namespace test_batch_norm
