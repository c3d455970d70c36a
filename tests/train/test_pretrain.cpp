// Denoising-autoencoder pre-training: the autoencoder graph (tied weights checked by
// finite differences), a short pre-training run that lowers reconstruction error and
// hands its values to the network, its config errors, and train's init_from.
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "pens/autodiff/gradcheck.h"
#include "pens/autodiff/tape.h"
#include "pens/graph/noise.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/autoencoder.h"
#include "pens/models/mlp.h"
#include "pens/models/synthetic.h"
#include "pens/serialization/model_file.h"
#include "pens/train/tasks/pretrain.h"
#include "pens/train/tasks/trainer.h"
#include "tests/support/helpers.h"
#include "tests/support/temp_dir.h"

namespace test_pretrain {

using namespace pens;
using nlohmann::json;

namespace {

// x [B, 5] -> a1 = x W1 + b1 -> h1 = tanh -> logits: smooth everywhere, so central
// differences hold at any point.
Graph small_tanh_network() {
  Graph g;
  const NodeId x = g.input("x", {kBatch, 5});
  const NodeId w1 = g.param("W1", {5, 3}, {{"init", std::string("normal")}, {"std", 0.5}});
  const NodeId b1 = g.param("b1", {3}, {{"init", std::string("constant")}, {"value", 0.1}});
  const NodeId h1 = g.add("tanh", {g.add("affine", {x, w1, b1}, {}, "a1")}, {}, "h1");
  const NodeId w2 = g.param("W2", {3, 2}, {{"init", std::string("normal")}, {"std", 0.5}});
  const NodeId b2 = g.param("b2", {2});
  g.set_flag(g.add("affine", {h1, w2, b2}, {}, "logits"), kOutput);
  return g;
}

std::vector<NoiseAnnotation> authors_first_layer_corruption() {
  Attributes gaussian, mask;
  gaussian.set("sigma", 0.1);
  mask.set("p", 0.25);
  mask.set("rescale", int64_t{0});
  return {{"gaussian", gaussian}, {"mask", mask}};
}

struct Quiet : TrainObserver {
  std::vector<std::string> messages;
  void on_message(const std::string& text) override { messages.push_back(text); }
};

std::vector<json> read_lines(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("the autoencoder encodes with the network's own W and b and decodes with W transposed") {
  const Graph net = small_tanh_network();
  const Model ae = denoising_autoencoder(net, {.node = "a1", .corruption = authors_first_layer_corruption(), .l1 = 0});
  const Graph& g = ae.graph;
  // W1 feeds the encoder and the decoder: its gradient must add both uses.
  std::vector<std::string> users;
  for (NodeId v : g.consumers(g.at("W1"))) users.push_back(g[v].name);
  std::sort(users.begin(), users.end());
  CHECK(users == std::vector<std::string>{"a1", "decoded"});
  CHECK(g["decoded"].attrs.get_int("transpose_b") == 1);
  CHECK(g["h1"].op->name == "tanh");
  CHECK(g["x"].noise.size() == 2);
  CHECK(g["target"].noise.empty());
  CHECK(g.find("a1/visible_bias"));
  CHECK_FALSE(g.find("W2"));  // only the layer's own parameters

  SUBCASE("the tied-weight gradient matches central differences, corruption included") {
    const Graph training = build_pseudo_ensemble(g, *ae.ensemble).graph;
    // The child's corrupted input really is corrupted (the loss reads it).
    CHECK(training.find("c1/x~mask"));
    const GradcheckResult r = gradcheck(training, {}, {.tolerance = 1e-6, .batch = 4});
    INFO(r.worst);
    CHECK(r.entries > 0);
    CHECK(r.passed);
  }
  SUBCASE("with the L1 activity penalty") {
    const Model l1 = denoising_autoencoder(net, {.node = "a1", .corruption = {}, .l1 = 0.3});
    const Graph training = build_pseudo_ensemble(l1.graph, *l1.ensemble).graph;
    const GradcheckResult r = gradcheck(training, {}, {.tolerance = 1e-6, .batch = 4});
    INFO(r.worst);
    CHECK(r.passed);
  }
  SUBCASE("with the authors' sparsity cost and noisy weights: the noise replays from its key") {
    const Model s = denoising_autoencoder(net, {.node = "a1", .corruption = {}, .sparsity = 0.2, .weight_noise = 0.05});
    REQUIRE(s.graph["W1"].noise.size() == 1);
    CHECK(s.graph["W1"].noise[0].kind == "fuzz");
    const Graph training = build_pseudo_ensemble(s.graph, *s.ensemble).graph;
    CHECK(training.find("c1/W1~fuzz"));
    const GradcheckResult r = gradcheck(training, {}, {.tolerance = 1e-6, .batch = 4});
    INFO(r.worst);
    CHECK(r.entries > 0);
    CHECK(r.passed);
  }
  SUBCASE("a node that is not an affine layer is refused by name") {
    CHECK_THROWS_WITH(denoising_autoencoder(net, {.node = "h1", .corruption = {}, .l1 = 0}),
                      doctest::Contains("'h1'"));
  }
}

TEST_CASE("the sparsity cost is the L1 of the code with rows, then columns, scaled to unit norm") {
  const Graph net = small_tanh_network();
  const Model ae = denoising_autoencoder(net, {.node = "a1", .corruption = {}, .sparsity = 0.5});
  ParamStore<double> params(ae.graph);
  params.initialize(ae.graph, 4);
  Tape<double> tape(ae.graph, params, {.batch = 6});
  auto x = tape.input("x");
  for (int64_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7 * static_cast<double>(i) + 0.2);
  tape.forward();
  const Eigen::MatrixXd code = tape.value("h1").mat();
  REQUIRE(code.rows() == 6);
  double rows = 0, columns = 0;
  for (int64_t r = 0; r < code.rows(); ++r) rows += code.row(r).cwiseAbs().sum() / std::sqrt(code.row(r).squaredNorm() + 1e-6);
  for (int64_t c = 0; c < code.cols(); ++c) {
    columns += code.col(c).cwiseAbs().sum() / std::sqrt(code.col(c).squaredNorm() + 1e-6);
  }
  const double expected = 0.5 * (rows / static_cast<double>(code.rows()) + columns / static_cast<double>(code.cols()));
  CHECK(expected > 0.5);
  CHECK(tape.value("sparsity")[0] == doctest::Approx(expected).epsilon(1e-12));
}

TEST_CASE("pre-training lowers reconstruction error layer by layer and hands the network its values") {
  testing::TempDir dir;
  Model network;
  network.graph = build_mlp({.layers = {16, 12, 8, 4}, .weight_std = 0.1, .max_norm = 3.5, .mask_input = 0.2});
  const std::string model_path = dir / "net.model.json";
  save_model(network, model_path, ValueStorage::None);

  const json config_json = {
      {"model", model_path},
      {"layers",
       {{{"node", "a1"}, {"epochs", 6}, {"corruption", noise_list_json(authors_first_layer_corruption())}},
        {{"node", "a2"}, {"epochs", 6}, {"corruption", json::parse(R"([{"kind": "mask", "p": 0.25, "rescale": 0}])")}}}},
      {"batch", 20},
      {"optimizer", {{"learning_rate", 0.01}, {"momentum", 0.9}}},
      {"run", {{"steps_per_epoch", 30}, {"threads", 1}}}};
  const PretrainConfig config = parse_pretrain_config(config_json, "test config");
  CHECK(to_json(config)["layers"][0]["corruption"][1]["rescale"] == 0);
  const Dataset images = make_teacher_task(600, 16, 4, 1);
  Quiet quiet;
  const TrainSummary summary = pretrain(config, images, dir.path(), quiet);
  REQUIRE_FALSE(summary.diverged);

  const std::vector<json> lines = read_lines(dir / "metrics.jsonl");
  REQUIRE(lines.size() == 2 * 7);  // per layer: before training, then every epoch
  for (const char* layer : {"a1", "a2"}) {
    std::vector<double> denoising, clean;
    for (const json& m : lines) {
      if (m["layer"] != layer) continue;
      denoising.push_back(m["denoising_error"].get<double>());
      clean.push_back(m["clean_reconstruction"].get<double>());
    }
    INFO("layer " << layer);
    REQUIRE(denoising.size() == 7);
    CHECK(denoising.back() < 0.8 * denoising.front());
    CHECK(denoising[3] < denoising.front());
    CHECK(clean.back() < clean.front());
  }
  const json s = json::parse(std::ifstream(dir / "summary.json"));
  CHECK(s["status"] == "finished");
  CHECK(s["layers"].size() == 2);
  CHECK(std::filesystem::exists(dir / "filters.png"));  // 16 inputs: 4 × 4 tiles

  // The network's pre-trained parameters moved; the output layer kept its initial values.
  const Model trained = load_model(dir / "model.json");
  REQUIRE(trained.values);
  ParamStore<float> initial(network.graph);
  initial.initialize(network.graph, config.init_seed);
  for (const char* name : {"W1", "b1", "W2", "b2"}) {
    INFO(name);
    CHECK_FALSE(trained.values->value(name).arr().isApprox(initial.value(name).arr()));
  }
  CHECK(trained.values->value("W3").arr().isApprox(initial.value("W3").arr()));
  CHECK(trained.metadata.contains("pretrained"));

  SUBCASE("train's init_from copies the values by name, and refuses other shapes") {
    ParamStore<float> params(network.graph);
    params.initialize(network.graph, 9);
    const std::string line = initialize_from(params, network.graph, dir / "model.json");
    CHECK(line.find("6 of 6") != std::string::npos);
    CHECK(params.value("W2").arr().isApprox(trained.values->value("W2").arr()));

    const Graph wider = build_mlp({.layers = {16, 13, 8, 4}});
    ParamStore<float> other(wider);
    CHECK_THROWS_WITH(initialize_from(other, wider, dir / "model.json"), doctest::Contains("'W1' has shape"));
  }
}

TEST_CASE("pre-training resumed from any checkpoint, at a layer's start or inside one, ends as the unbroken run") {
  testing::TempDir dir;
  Model network;
  network.graph = build_mlp({.layers = {16, 12, 8, 4}, .weight_std = 0.1, .max_norm = 3.5, .mask_input = 0.2});
  save_model(network, dir / "net.model.json", ValueStorage::None);
  const json config_json = {
      {"model", dir / "net.model.json"},
      {"layers",
       {{{"node", "a1"}, {"epochs", 3}, {"corruption", noise_list_json(authors_first_layer_corruption())}},
        {{"node", "a2"}, {"epochs", 3}, {"corruption", json::parse(R"([{"kind": "mask", "p": 0.25}])")}}}},
      {"batch", 20},
      {"optimizer", {{"learning_rate", 0.01}, {"momentum", 0.9}, {"decay", 0.9}}},
      {"run", {{"steps_per_epoch", 30}, {"threads", 1}}},
      {"checkpoint", {{"every_epochs", 1}, {"keep", 10}}}};
  const PretrainConfig config = parse_pretrain_config(config_json, "test config");
  const Dataset images = make_teacher_task(300, 16, 4, 2);
  Quiet quiet;
  REQUIRE_FALSE(pretrain(config, images, dir / "whole", quiet).diverged);
  const auto without_times = [](const std::string& path) {
    std::vector<json> lines = read_lines(path);
    for (json& m : lines) m.erase("elapsed_seconds");
    return lines;
  };
  const auto values = [](const std::string& path) {
    const Model m = load_model(path);
    return std::vector<float>(m.values->values().begin(), m.values->values().end());
  };
  const std::vector<json> whole = without_times(dir / "whole/metrics.jsonl");
  REQUIRE(whole.size() == 2 * 4);  // per layer: before training, then every epoch
  CHECK(whole[4]["layer"] == "a2");
  CHECK(whole[4]["epoch"] == 0);
  CHECK(whole[4]["step"] == 90);
  // 90: the first layer's end and the second's start; 120: inside the second layer.
  for (const int step : {90, 120}) {
    CAPTURE(step);
    const std::string copy = dir / cat("from", step);
    std::filesystem::copy(dir / "whole", copy);
    const TrainSummary resumed = pretrain(config, images, copy, quiet, Resume(cat(copy, "/checkpoint-", step, ".pens")));
    REQUIRE_FALSE(resumed.diverged);
    CHECK(without_times(copy + "/metrics.jsonl") == whole);
    CHECK(values(copy + "/model.json") == values(dir / "whole/model.json"));
    CHECK(resumed.json["layers"] == json::parse(std::ifstream(dir / "whole/summary.json"))["layers"]);
  }
}

TEST_CASE("pre-training configs: errors name the field") {
  const auto parse = [](const char* text) { return parse_pretrain_config(json::parse(text), "p.json"); };
  CHECK_THROWS_WITH(parse(R"({"layers": [{"node": "a1"}]})"), doctest::Contains("no model file"));
  CHECK_THROWS_WITH(parse(R"({"model": "m", "layers": []})"), doctest::Contains("layers must be a non-empty array"));
  CHECK_THROWS_WITH(parse(R"({"model": "m", "layers": [{"node": "a1", "epoch": 3}]})"),
                    doctest::Contains("unknown field layers[0].epoch"));
  CHECK_THROWS_WITH(parse(R"({"model": "m", "layers": [{"node": "a1", "corruption": [{"kind": "blur"}]}]})"),
                    doctest::Contains("blur"));
  CHECK_THROWS_WITH(parse(R"({"model": "m", "layers": [{"node": "a1", "corruption": [{"kind": "mask", "q": 0.5}]}]})"),
                    doctest::Contains("layers[0].corruption/0"));
  // A parameters-only kind on the corrupted input (the config fuzzer's find: the input was
  // a node without an op, and checking its kind read through a null pointer).
  CHECK_THROWS_WITH(parse(R"({"model": "m", "layers": [{"node": "a1", "corruption": [{"kind": "fuzz"}]}]})"),
                    doctest::Contains("applies to parameters only"));
  CHECK_THROWS_WITH(parse(R"({"model": "m", "layers": [{"node": "a1"}], "optimizer": {"momentum": 1.5}})"),
                    doctest::Contains("optimizer.momentum"));
  CHECK_THROWS_WITH(
      parse(R"({"model": "m", "layers": [{"node": "a1"}], "optimizer": {"momentum": 0.5, "momentum_end": 0.9}})"),
      doctest::Contains("either momentum (constant) or momentum_start and momentum_end"));
  CHECK_THROWS_WITH(parse(R"({"model": "m", "layers": [{"node": "a1"}], "optimizer": {"max_norm_rule": "rows"}})"),
                    doctest::Contains("optimizer.max_norm_rule"));
  CHECK_THROWS_WITH(parse(R"({"model": "m", "layers": [{"node": "a1", "sparsity": -1}]})"),
                    doctest::Contains("layers[0].sparsity"));
}

TEST_CASE("pre-training configs: the authors' settings read and round-trip") {
  const PretrainConfig c = parse_pretrain_config(json::parse(R"({"model": "m",
      "layers": [{"node": "a1", "sparsity": 0.2, "weight_noise": 0.01}],
      "optimizer": {"learning_rate": 0.02, "warmup_epochs": 20, "decay": 0.998, "momentum_start": 0.5,
                    "momentum_end": 0.99, "momentum_epochs": 500, "max_norm_rule": "input-outgoing-squared"}})"),
                                                 "p.json");
  CHECK(c.layers[0].autoencoder.sparsity == 0.2);
  CHECK(c.layers[0].autoencoder.weight_noise == 0.01);
  CHECK(c.schedule.warmup_epochs == 20);
  CHECK(c.schedule.momentum_start == 0.5);
  CHECK(c.schedule.momentum_end == 0.99);
  CHECK(c.schedule.momentum_epochs == 500);
  CHECK(c.max_norm_rule == "input-outgoing-squared");
  CHECK(to_json(parse_pretrain_config(to_json(c), "again")) == to_json(c));
  // "momentum" alone is a constant momentum.
  const PretrainConfig constant =
      parse_pretrain_config(json::parse(R"({"model": "m", "layers": [{"node": "a1"}], "optimizer": {"momentum": 0.7}})"),
                            "p.json");
  CHECK(constant.schedule.momentum_start == 0.7);
  CHECK(constant.schedule.momentum_end == 0.7);
}

}  // namespace test_pretrain
