// The extensions of examples/extending: an op, a noise kind, a penalty kind and an
// optimizer, each one file outside the library plus one registration line. Each is
// checked as pens' own are (gradients by finite differences, draws, hand-computed
// updates), the docs show each file as it is, and the example program that uses all four
// learns.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "examples/extending/cosine_penalty.h"
#include "examples/extending/multiplicative_noise.h"
#include "examples/extending/recursive_cell.h"
#include "examples/extending/rmsprop_optimizer.h"
#include "examples/extending/sentence_treebank.h"
#include "examples/extending/sign_adversarial_noise.h"
#include "examples/extending/softplus_op.h"
#include "examples/extending/standardized_source.h"
#include "pens/autodiff/gradcheck.h"
#include "pens/autodiff/tape.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/data_source.h"
#include "pens/models/family.h"
#include "pens/models/mlp.h"
#include "pens/models/synthetic.h"
#include "pens/ops/random.h"
#include "pens/ops/registry.h"
#include "pens/serialization/files.h"
#include "pens/serialization/json_text.h"
#include "pens/serialization/model_file.h"
#include "pens/train/loop/run.h"
#include "pens/train/tasks/tree_model.h"
#include "pens/train/tasks/tree_trainer.h"
#include "tests/support/eval.h"
#include "tests/support/helpers.h"
#include "tests/support/npy.h"
#include "tests/support/paths.h"
#include "tests/support/run.h"
#include "tests/support/temp_dir.h"
#include "tests/support/treebank.h"

namespace test_extending {

using namespace pens;

namespace {

// The registration line of each extension example (examples/extending/main.cpp has the
// first five), once per test process.
void register_extensions() {
  if (!OpRegistry::global().find("softplus")) OpRegistry::register_global<Softplus>();
  if (!NoiseRegistry::global().find("multiplicative")) NoiseRegistry::register_global(multiplicative_noise());
  if (!NoiseRegistry::global().find("sign_adversarial")) NoiseRegistry::register_global(sign_adversarial_noise());
  if (!PenaltyRegistry::global().find("cosine")) PenaltyRegistry::register_global(cosine_penalty());
  if (!OptimizerRegistry::global().find("rmsprop")) OptimizerRegistry::register_global(rmsprop_optimizer());
  if (!DataSourceRegistry::global().find("standardized")) DataSourceRegistry::register_global(standardized_source());
  if (!ModelFamilyRegistry::global().find("recursive")) ModelFamilyRegistry::register_global(recursive_family());
  if (!TreebankSourceRegistry::global().find("sentences")) TreebankSourceRegistry::register_global(sentence_source());
}

// Trains a prepared tree run of 8 epochs into its out folder; the training trees' root
// accuracy after the first epoch and after the last.
std::pair<double, double> root_accuracy_first_and_last(const PreparedRun& run) {
  struct Quiet : TrainObserver {} quiet;
  const TrainSummary summary = run_training(run, quiet);
  REQUIRE(summary.json["status"] == "finished");
  std::ifstream metrics(run.out_dir + "/metrics.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(metrics, line);) lines.push_back(nlohmann::json::parse(line));
  REQUIRE(lines.size() == 8);
  return {lines.front()["train_root_accuracy"].get<double>(), lines.back()["train_root_accuracy"].get<double>()};
}

// The same for a tree config written into a folder, trained into the folder's out/.
std::pair<double, double> root_accuracy_first_and_last(const std::filesystem::path& config) {
  RunOptions options;
  options.out = config.parent_path() / "out";
  return root_accuracy_first_and_last(prepare_run(config, options));
}

std::string source(const std::string& path) {
  return read_file(pens::testing::source_dir() + "/" + path, 1 << 20);
}

// A tanh 6-9-3 network: no kinks, so finite differences hold everywhere.
Graph tanh_network() {
  Graph g;
  const NodeId x = g.input("x", {kBatch, 6});
  const NodeId y = g.input("y", {kBatch}, DType::Index);
  const Attributes init{{"init", std::string("normal")}, {"std", 0.6}};
  const NodeId h1 = g.add("tanh", {g.add("affine", {x, g.param("W1", {6, 9}, init), g.param("b1", {9}, init)}, {}, "a1")},
                          {}, "h1");
  const NodeId logits = g.add("affine", {h1, g.param("W2", {9, 3}, init), g.param("b2", {3}, init)}, {}, "logits");
  g.set_flag(logits, kOutput);
  g.set_flag(g.add("mean", {g.add("softmax_xent", {logits, y})}, {}, "loss"), kLoss);
  return g;
}

}  // namespace

TEST_CASE("an op from outside: softplus, registered with one line, computes log(1 + e^x) with a checked gradient") {
  register_extensions();
  const OpDef& op = OpRegistry::global().at("softplus");
  int64_t entries = 0;
  for (const OpCheckResult& r : gradcheck_op(op)) {
    INFO(r.label << ": " << r.result.worst);
    CHECK(r.result.passed);
    entries += r.result.entries;
  }
  CHECK(entries == 144);  // one 3x4 case: a 12 x 12 Jacobian
  Graph g;
  const NodeId x = g.input("x", {1, 3});
  g.set_flag(g.add("softplus", {x}, {}, "y"), kOutput);
  const auto y = testing::evaluate(g, {{"x", {-2.0, 0.0, 3.0}}}, "y");
  for (size_t i = 0; i < 3; ++i) CHECK(y[i] == doctest::Approx(std::log1p(std::exp(std::vector{-2.0, 0.0, 3.0}[i]))));
}

TEST_CASE("a noise kind from outside: multiplicative noise draws one factor per element") {
  register_extensions();
  Graph parent = tanh_network();
  add_noise(parent, parent.at("h1"), "multiplicative", {{"sigma", 0.5}});
  PseudoEnsembleSpec spec;
  spec.loss_on = "children";
  const Graph g = build_pseudo_ensemble(parent, spec).graph;
  CHECK(g["c2/h1~multiplicative"].op->name == "add");
  CHECK(g.nodes_with(kLoss).size() == 2);  // the mean over the two children's losses

  // (out / in - 1) / sigma over 100 x 9 elements: standard normal draws, all different.
  const int64_t rows = 100;
  std::vector<double> x(static_cast<size_t>(rows * 6));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * static_cast<double>(i));
  const testing::Values v{{"x", x}, {"y", std::vector<double>(rows, 1.0)}};
  const auto clean = testing::evaluate(g, v, "c1/h1", rows, {4, 2});
  const auto noisy = testing::evaluate(g, v, "c1/h1~multiplicative", rows, {4, 2});
  std::vector<double> eps;
  for (size_t i = 0; i < clean.size(); ++i) {
    if (std::abs(clean[i]) > 1e-3) eps.push_back((noisy[i] / clean[i] - 1) / 0.5);
  }
  REQUIRE(eps.size() > 800);
  double mean = 0, square = 0;
  for (double e : eps) mean += e / static_cast<double>(eps.size());
  for (double e : eps) square += (e - mean) * (e - mean) / static_cast<double>(eps.size());
  std::sort(eps.begin(), eps.end());
  const auto distinct = std::unique(eps.begin(), eps.end(), [](double a, double b) { return std::abs(a - b) < 1e-6; });
  CHECK(distinct - eps.begin() > static_cast<std::ptrdiff_t>(0.99 * static_cast<double>(eps.size())));
  CHECK(std::abs(mean) < 0.1);
  CHECK(std::sqrt(square) == doctest::Approx(1.0).epsilon(0.1));
  // The children draw differently, and the combined objective's gradient checks out.
  CHECK(noisy != testing::evaluate(g, v, "c2/h1~multiplicative", rows, {4, 2}));
  const GradcheckResult r = gradcheck(g, {{"y", {0, 1, 2, 1}}}, {.batch = 4});
  INFO(r.worst);
  CHECK(r.passed);
}

TEST_CASE("a noise kind found from gradients, from outside: the sign of the divergence's gradient, times eps") {
  register_extensions();
  Graph parent = tanh_network();
  add_noise(parent, parent.at("x"), "sign_adversarial", {{"eps", 0.1}, {"xi", 1e-2}});
  PseudoEnsembleSpec spec;
  spec.children = 1;
  spec.pairing = "parent-child";
  spec.penalties = {{"logits", "kl", 1.0, "all", true}};
  const PseudoEnsemble e = build_pseudo_ensemble(parent, spec);
  const int64_t rows = 3, width = 6;
  ParamStore<double> params(e.graph);
  params.initialize(e.graph, 2);
  Tape<double> tape(e.graph, params, {.batch = rows});
  auto x = tape.input("x");
  for (int64_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.9 * static_cast<double>(i));
  tape.input("y").arr().setZero();
  const NoiseKey key{4, 9};
  tape.set_noise_key(key);
  tape.forward();
  const auto r = tape.value("c1/x~r_sign");

  // The random start, replayed from the probe's site, and the gradient of D there by
  // central differences of the body's objective: r is eps times its sign.
  std::vector<double> start(static_cast<size_t>(rows * width));
  NoiseStream(key, static_cast<uint64_t>(e.graph["c1/x~r_sign"].attrs.get_int("stream"))).normal(start.data(), rows * width, 1.0);
  for (int64_t i = 0; i < rows; ++i) {
    double squares = 0;
    for (int64_t j = 0; j < width; ++j) squares += start[i * width + j] * start[i * width + j];
    for (int64_t j = 0; j < width; ++j) start[i * width + j] *= 1e-2 / std::sqrt(squares);
  }
  Tape<double> body(*e.graph.probe("c1/x~r_sign")->graph, params, {.batch = rows});
  std::copy(x.data, x.data + x.size(), body.input("x").data);
  body.set_noise_key(key);
  const auto divergence = [&](const std::vector<double>& at) {
    std::copy(at.begin(), at.end(), body.input("c1/x~r_sign").data);
    body.forward();
    return body.objective();
  };
  int compared = 0;
  for (size_t k = 0; k < start.size(); ++k) {
    std::vector<double> up = start, down = start;
    up[k] += 1e-6;
    down[k] -= 1e-6;
    const double grad = (divergence(up) - divergence(down)) / 2e-6;
    CAPTURE(k);
    CHECK(std::abs(r[static_cast<int64_t>(k)]) == 0.1);
    if (std::abs(grad) < 1e-7) continue;  // too small for its sign to be read reliably
    CHECK(r[static_cast<int64_t>(k)] == (grad > 0 ? 0.1 : -0.1));
    ++compared;
  }
  CHECK(compared > 12);
}

TEST_CASE("a penalty kind from outside: the cosine distance between children, with a checked gradient") {
  register_extensions();
  const Graph parent = tanh_network();
  PseudoEnsembleSpec spec;
  spec.loss_on = "child";
  spec.penalties = {{"h1", "cosine", 0.7, "all"}, {"logits", "cosine", 1.3, "all"}};
  Graph noisy = parent;
  add_noise(noisy, noisy.at("h1"), "gaussian", {{"sigma", 0.3}});
  add_noise(noisy, noisy.at("x"), "mask", {{"p", 0.3}});
  const PseudoEnsemble ensemble = build_pseudo_ensemble(noisy, spec);
  REQUIRE(ensemble.penalties.size() == 2);
  const PenaltyHandle& h = ensemble.penalties[0];
  CHECK(h.value == "pen/h1/cosine");

  // λ · mean over rows of 1 - cos(c1/h1, c2/h1), by hand.
  const int64_t rows = 5;
  std::vector<double> x(static_cast<size_t>(rows * 6));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(1.3 * static_cast<double>(i));
  const testing::Values v{{"x", x}, {"y", {0, 1, 2, 0, 1}}};
  const NoiseKey key{8, 1};
  const auto a = testing::evaluate(ensemble.graph, v, "c1/h1", rows, key);
  const auto b = testing::evaluate(ensemble.graph, v, "c2/h1", rows, key);
  double expected = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0, na = 0, nb = 0;
    for (int64_t j = 0; j < 9; ++j) {
      const size_t i = static_cast<size_t>(r * 9 + j);
      dot += a[i] * b[i];
      na += a[i] * a[i];
      nb += b[i] * b[i];
    }
    expected += 0.7 * (1 - dot / std::sqrt(na * nb)) / static_cast<double>(rows);
  }
  CHECK(expected > 1e-3);  // the children differ: the penalty is not 0 = 0
  CHECK(testing::evaluate(ensemble.graph, v, h.value, rows, key)[0] == doctest::Approx(expected).epsilon(1e-9));
  const GradcheckResult r = gradcheck(ensemble.graph, {{"y", {0, 1, 2}}}, {.batch = 3});
  INFO(r.worst);
  CHECK(r.passed);
  CHECK(r.variables > 100);
}

TEST_CASE("an optimizer from outside: RMSprop against a hand-computed update, its state saved by name") {
  register_extensions();
  Graph g;
  g.param("w", {2}, {{"init", std::string("constant")}, {"value", 1.0}});
  ParamStore<float> params(g);
  params.initialize(g, 0);
  const auto rmsprop = make_optimizer("rmsprop", params, {{"rho", 0.75}, {"epsilon", 1e-8}});
  auto grad = params.grad("w");
  grad[0] = 2.0f;
  grad[1] = -0.5f;
  rmsprop->step({.step = 0, .learning_rate = 0.1});
  // s = 0.25 g², so each weight moves by η g / (0.5 |g|) = 2η sign(g).
  CHECK(params.value("w")[0] == doctest::Approx(0.8));
  CHECK(params.value("w")[1] == doctest::Approx(1.2));
  grad[0] = 1.0f;
  rmsprop->step({.step = 1, .learning_rate = 0.1});
  // s = 0.75 · 1 + 0.25 · 1 = 1: w0 moves by η.
  CHECK(params.value("w")[0] == doctest::Approx(0.7).epsilon(1e-6));
  const OptimizerState state = rmsprop->checkpoint_state();
  CHECK(state.kind == "rmsprop");
  REQUIRE(state.buffers.size() == 1);
  CHECK(state.buffers[0].name == "mean_square");
  CHECK(state.buffers[0].values[0] == doctest::Approx(1.0));

  testing::TempDir dir;
  save_checkpoint(dir / "rmsprop.pens", {.step = 2, .seed = 1}, params, state);
  ParamStore<float> restored(g);
  const auto again = make_optimizer("rmsprop", restored);
  load_checkpoint(dir / "rmsprop.pens", restored, again->checkpoint_state());
  CHECK(again->state()[0].values[1] == state.buffers[0].values[1]);
  CHECK(restored.value("w")[0] == params.value("w")[0]);
}

// The teacher task's examples as a .npy pair whose features are on scales apart (feature
// f times 10^(f mod 4), shifted by f): what the standardized source is for.
void write_scaled_pair(const pens::testing::TempDir& dir, const std::string& stem, int64_t n, uint64_t seed) {
  const Dataset d = make_teacher_task(n, 8, 3, seed);
  std::vector<float> x = d.x;
  std::vector<int64_t> y(d.y.begin(), d.y.end());
  for (size_t i = 0; i < x.size(); ++i) {
    const auto f = static_cast<int>(i % 8);
    x[i] = x[i] * static_cast<float>(std::pow(10.0, f % 4)) + static_cast<float>(f);
  }
  pens::testing::write_npy_floats(dir / (stem + "_x.npy"), {n, 8}, x);
  pens::testing::write_npy_labels(dir / (stem + "_y.npy"), y);
}

TEST_CASE("a registered data source: standardized features, and pens' run on them learns") {
  register_extensions();
  const pens::testing::TempDir dir;
  write_scaled_pair(dir, "train", 1200, 1);
  write_scaled_pair(dir, "test", 400, 2);
  const Attributes settings{{"x", std::string("train_x.npy")}, {"y", std::string("train_y.npy")},
                            {"test_x", std::string("test_x.npy")}, {"test_y", std::string("test_y.npy")}};
  const TrainData data = load_data("standardized", dir.path(), settings);
  REQUIRE(data.train.size == 1200);
  REQUIRE(data.test.size == 400);
  CHECK(data.train.classes == 3);
  for (int64_t f = 0; f < 8; ++f) {
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < data.train.size; ++i) {
      const double v = data.train.x[static_cast<size_t>(i * 8 + f)];
      sum += v, squares += v * v;
    }
    CHECK(sum / 1200 == doctest::Approx(0).epsilon(1e-5));
    CHECK(squares / 1200 == doctest::Approx(1).epsilon(1e-3));
  }

  // A config names the source; pens' run reads and trains it.
  write_file_atomically(dir / "net.model.json",
                        R"({"format_version": 1, "opset_version": 1,
  "inputs": [{"name": "x", "shape": [-1, 8]}, {"name": "y", "shape": [-1], "dtype": "index"}],
  "parameters": [{"name": "W1", "shape": [8, 16], "init": {"kind": "normal", "std": 0.3}},
                 {"name": "b1", "shape": [16], "init": {"kind": "constant", "value": 0.0}},
                 {"name": "W2", "shape": [16, 3], "init": {"kind": "normal", "std": 0.3}},
                 {"name": "b2", "shape": [3], "init": {"kind": "constant", "value": 0.0}}],
  "nodes": [{"name": "a1", "op": "affine", "inputs": ["x", "W1", "b1"]},
            {"name": "h1", "op": "tanh", "inputs": ["a1"]},
            {"name": "logits", "op": "affine", "inputs": ["h1", "W2", "b2"]},
            {"name": "xent", "op": "softmax_xent", "inputs": ["logits", "y"]},
            {"name": "loss", "op": "mean", "inputs": ["xent"], "flags": ["loss"]}],
  "outputs": ["logits"]})");
  write_file_atomically(dir / "run.json", R"({"model": "net.model.json",
  "data": {"source": "standardized", "dir": ".", "x": "train_x.npy", "y": "train_y.npy",
           "test_x": "test_x.npy", "test_y": "test_y.npy", "validation": 200},
  "batch": {"labeled": 50},
  "optimizer": {"learning_rate": 0.1, "warmup_epochs": 0},
  "run": {"epochs": 6, "steps_per_epoch": 20, "threads": 1}})");
  RunOptions options;
  options.out = dir / "out";
  const PreparedRun run = prepare_run(dir / "run.json", options);
  struct Quiet : TrainObserver {} quiet;
  const TrainSummary summary = run_training(run, quiet);
  INFO(summary.json.dump());
  REQUIRE_FALSE(summary.diverged);
  CHECK(summary.json["config"]["data"]["source"] == "standardized");
  // Three classes: chance is 2/3 wrong.
  MESSAGE("test error on the standardized teacher task: ", summary.json["final"]["test_error"].get<double>());
  CHECK(summary.json["final"]["test_error"].get<double>() < 0.25);
}

TEST_CASE("a registered model family: a tree cell of one's own trains on a treebank through a tree config") {
  register_extensions();
  const pens::testing::TempDir dir;
  pens::testing::write_treebank(dir.path(), 200, 40, 40, 31);
  const Model model = build_model("recursive", {{"vocabulary", int64_t{9}}, {"fuzz", 0.02}});
  CHECK_THROWS_WITH_AS(build_model("recursive", {}), doctest::Contains("vocabulary"), Error);
  save_model(model, dir / "rnn.model.json");
  // The word table is found by the words port, whatever its name.
  CHECK(TreeModel(model, SentimentTask::Fine).word_tables() == std::vector<std::string>{"table"});
  write_file_atomically(dir / "rnn.json", R"({"kind": "trees", "task": "fine", "model": "rnn.model.json",
  "data": {"dir": "."}, "batch": {"trees": 10}, "optimizer": {"learning_rate": 0.1},
  "freeze_words_epochs": 1, "run": {"epochs": 8, "threads": 1}, "eval": {"train_trees": 200}})");
  const std::pair<double, double> accuracy = root_accuracy_first_and_last(dir / "rnn.json");
  const double first = accuracy.first, last = accuracy.second;  // clang 14's CHECK captures no bindings
  MESSAGE("root accuracy on the training trees: epoch 1 ", first, ", epoch 8 ", last);
  CHECK(last > first + 0.1);
}

TEST_CASE("an N-ary cell of one's own trains on a treebank of ternary trees; a binary cell refuses them") {
  register_extensions();
  const pens::testing::TempDir dir;
  pens::testing::write_treebank(dir.path(), 200, 40, 40, 37, 3);
  save_model(build_model("recursive", {{"vocabulary", int64_t{9}}, {"arity", int64_t{3}}}), dir / "rnn3.model.json");
  save_model(build_model("recursive", {{"vocabulary", int64_t{9}}}), dir / "rnn2.model.json");
  const auto config = [&](const std::string& model) {
    return cat(R"({"kind": "trees", "task": "fine", "model": ")", model, R"(",
  "data": {"source": "bracketed", "dir": ".", "max_children": 3}, "batch": {"trees": 10},
  "optimizer": {"learning_rate": 0.1}, "run": {"epochs": 8, "threads": 1}, "eval": {"train_trees": 200}})");
  };
  write_file_atomically(dir / "rnn3.json", config("rnn3.model.json"));
  write_file_atomically(dir / "rnn2.json", config("rnn2.model.json"));
  RunOptions options;
  options.out = dir / "out";
  const PreparedRun binary = prepare_run(dir / "rnn2.json", options);
  struct Quiet : TrainObserver {} quiet;
  CHECK_ERROR_MENTIONS(run_training(binary, quiet), "children but", "cell has 2 child ports");
  const PreparedRun run = prepare_run(dir / "rnn3.json", options);
  int64_t ternary = 0;
  for (const SentimentTree& tree : run.task_as<PreparedTrees>().data.bank.train) ternary += tree.shape.arity() == 3;
  CHECK(ternary > 50);  // the treebank has nodes of three children, read as such
  const std::pair<double, double> accuracy = root_accuracy_first_and_last(run);
  const double first = accuracy.first, last = accuracy.second;  // clang 14's CHECK captures no bindings
  CHECK(read_json_file(dir / "out/config.json")["data"]["max_children"] == 3);
  MESSAGE("ternary trees, root accuracy on the training trees: epoch 1 ", first, ", epoch 8 ", last);
  CHECK(last > first + 0.1);
}

TEST_CASE("a registered treebank source: sentences labeled as a whole train a tree model") {
  register_extensions();
  const pens::testing::TempDir dir;
  // Sentences of 2-7 words whose label is the sign of their words' polarity.
  const std::vector<std::pair<std::string, int>> words = {{"good", 1}, {"great", 1}, {"bad", -1}, {"awful", -1},
                                                          {"the", 0},  {"film", 0},  {"plot", 0}, {"was", 0}};
  std::mt19937_64 rng(41);
  for (const auto& [name, count] : std::vector<std::pair<std::string, int>>{{"train", 300}, {"dev", 40}, {"test", 40}}) {
    std::ofstream out(dir / (name + ".tsv"));
    for (int i = 0; i < count; ++i) {
      std::string sentence;
      int polarity = 0;
      for (int n = 2 + static_cast<int>(rng() % 6); n > 0; --n) {
        const auto& [w, p] = words[rng() % words.size()];
        sentence += " " + w, polarity += p;
      }
      out << (polarity > 0 ? 3 : polarity < 0 ? 1 : 2) << "\t" << sentence.substr(1) << "\n";
    }
  }
  const SentimentTreebank bank = load_treebank("sentences", dir.path(), {});
  REQUIRE(bank.train.size() == 300);
  const SentimentTree& sentence = bank.train[0];
  CHECK(sentence.label.back() >= 1);
  CHECK(std::count(sentence.label.begin(), sentence.label.end(), -1) == sentence.size() - 1);  // the root alone
  std::ofstream(dir / "bad.tsv") << "3\tgood film\n7 bad\n";
  CHECK_ERROR_MENTIONS(read_sentences(dir / "bad.tsv"), "bad.tsv:2: expected a label 0..4");
  save_model(build_model("recursive", {{"vocabulary", int64_t{9}}}), dir / "rnn.model.json");
  write_file_atomically(dir / "rnn.json", R"({"kind": "trees", "task": "fine", "model": "rnn.model.json",
  "data": {"source": "sentences", "dir": "."}, "batch": {"trees": 10}, "optimizer": {"learning_rate": 0.1},
  "run": {"epochs": 8, "threads": 1}, "eval": {"train_trees": 300}})");
  const std::pair<double, double> accuracy = root_accuracy_first_and_last(dir / "rnn.json");
  const double first = accuracy.first, last = accuracy.second;  // clang 14's CHECK captures no bindings
  MESSAGE("labeled sentences, root accuracy on the training trees: epoch 1 ", first, ", epoch 8 ", last);
  CHECK(last > first + 0.1);
}

TEST_CASE("the docs show every extension file as it is") {
  const std::vector<std::pair<std::string, std::string>> shown = {
      {"docs/adding-an-op.md", "examples/extending/softplus_op.h"},
      {"docs/adding-a-noise-kind.md", "examples/extending/multiplicative_noise.h"},
      {"docs/adding-a-noise-kind.md", "examples/extending/sign_adversarial_noise.h"},
      {"docs/adding-a-penalty.md", "examples/extending/cosine_penalty.h"},
      {"docs/adding-an-optimizer.md", "examples/extending/rmsprop_optimizer.h"},
      {"docs/adding-a-data-set.md", "examples/extending/standardized_source.h"},
      {"docs/adding-a-data-set.md", "examples/extending/sentence_treebank.h"},
      {"docs/adding-a-model.md", "examples/extending/recursive_cell.h"},
  };
  for (const auto& item : shown) {
    const auto& doc = item.first;  // not bindings: doctest captures them (clang < 16)
    const auto& file = item.second;
    INFO(doc << " showing " << file);
    const std::string text = source(doc);
    // The file's block follows the line that names it: "`examples/extending/x.h`:".
    const size_t named = text.find("`" + file + "`:");
    REQUIRE(named != std::string::npos);
    const size_t open = text.find("```cpp\n", named);
    REQUIRE(open != std::string::npos);
    const size_t close = text.find("```\n", open + 7);
    REQUIRE(close != std::string::npos);
    CHECK(text.substr(open + 7, close - open - 7) == source(file));
    // And the one registration line the doc promises.
    CHECK(text.find("register_global") != std::string::npos);
  }
}

TEST_CASE("the extending example program, using all four, learns") {
  const testing::Run run = testing::run_command(pens::testing::extending_example() + " --epochs 4");
  INFO(run.out);
  REQUIRE(run.status == 0);
  std::vector<std::pair<double, double>> epochs;  // objective, test error
  std::istringstream lines(run.out);
  for (std::string line; std::getline(lines, line);) {  // rows "    1      1.2165      22.80%"
    double objective = 0, error = 0;
    int end = 0;
    if (std::sscanf(line.c_str(), " %*d %lf %lf%%%n", &objective, &error, &end) == 2 &&
        end == static_cast<int>(line.size())) {
      epochs.emplace_back(objective, error);
    }
  }
  REQUIRE(epochs.size() == 4);
  CHECK(epochs.back().first < 0.6 * epochs.front().first);
  CHECK(epochs.back().second < 20.0);  // chance is 75% on 4 classes
}

}  // namespace test_extending
