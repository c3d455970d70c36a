// Checkpoints: atomic, validated, and a resumed run equal to an uninterrupted one.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "pens/autodiff/tape.h"
#include "pens/models/mlp.h"
#include "pens/models/synthetic.h"
#include "pens/ops/parallel.h"
#include "pens/serialization/checkpoint.h"
#include "pens/serialization/files.h"
#include "pens/serialization/model_file.h"
#include "pens/train/loop/step.h"
#include "pens/train/optim/optimizer.h"
#include "tests/support/helpers.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"

namespace test_checkpoint {

using namespace pens;

namespace {

// A training run whose every step is a function of (parameters, optimizer state, step):
// the batch is chosen by the step, the noise key is {seed, step}.
struct Run {
  Graph graph = build_mlp({.layers = {8, 16, 3}, .input_dropout = 0.2, .hidden_dropout = 0.5,
                           .weight_std = 0.3, .max_norm = 2.0});
  Dataset data = make_teacher_task(200, 8, 3, 5);
  ParamStore<float> params{graph};
  std::unique_ptr<Optimizer> optimizer;
  Tape<float> tape{graph, params, {.batch = 20}};
  uint64_t seed = 99;

  explicit Run(const std::string& kind = "sgd") : optimizer(make_optimizer(kind, params)) { params.initialize(graph, 1); }
  OptimizerState state() { return optimizer->checkpoint_state(); }
  void steps(int64_t from, int64_t to) {
    Step step(params, *optimizer, model_constraints(graph, params, MaxNormRule::UnitIncoming), seed);
    for (int64_t n = from; n < to; ++n) {
      step.run({.step = n, .learning_rate = 0.1, .momentum = std::min(0.9, 0.5 + 0.01 * static_cast<double>(n))}, tape,
               [&](Tape<float>& t, size_t) { copy_batch(data, n * 20, t.input("x"), t.input("y")); });
    }
  }
};

}  // namespace

TEST_CASE("resume: N steps straight equal N/2 steps, a checkpoint, a fresh process state, N/2 steps") {
  const int saved_threads = threads();
  set_threads(1);
  for (const char* kind : {"sgd", "adagrad"}) {
    INFO("optimizer " << kind);
    testing::TempDir dir;
    const int64_t n = 40;
    Run straight(kind);
    straight.steps(0, n);

    Run first_half(kind);
    first_half.steps(0, n / 2);
    const TrainingState state{n / 2, first_half.seed, {{"epochs", 4}, {"lr", 0.1}}, 12.5};
    save_checkpoint(dir / "ckpt", state, first_half.params, first_half.state());

    Run resumed(kind);  // new parameters, optimizer and tape, as in a new process
    resumed.seed = 0;
    const TrainingState loaded = load_checkpoint(dir / "ckpt", resumed.params, resumed.state());
    CHECK(loaded == state);
    resumed.seed = loaded.seed;
    resumed.steps(loaded.step, n);

    CHECK(std::equal(resumed.params.values().begin(), resumed.params.values().end(),
                     straight.params.values().begin()));
    const auto a = resumed.state().buffers.at(0).values, b = straight.state().buffers.at(0).values;
    CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
    // And the run did move: the comparison is not between two untouched models.
    Run untouched(kind);
    CHECK_FALSE(std::equal(untouched.params.values().begin(), untouched.params.values().end(),
                           straight.params.values().begin()));
  }
  set_threads(saved_threads);
}

TEST_CASE("a writer killed between write and rename leaves the previous checkpoint loadable") {
  testing::TempDir dir;
  Run run;
  run.steps(0, 3);
  save_checkpoint(dir / "ckpt", {3, run.seed, {}}, run.params, run.state());
  const std::vector<float> saved(run.params.values().begin(), run.params.values().end());
  run.steps(3, 6);
  CHECK_THROWS_AS(save_checkpoint(dir / "ckpt", {6, run.seed, {}}, run.params, run.state(),
                                  [] { throw Error("killed between write and rename"); }),
                  Error);
  Run fresh;
  const TrainingState s = load_checkpoint(dir / "ckpt", fresh.params, fresh.state());
  CHECK(s.step == 3);
  CHECK(std::equal(saved.begin(), saved.end(), fresh.params.values().begin()));
}

TEST_CASE("the temporary files of writes a kill cut short are removed, and nothing else") {
  testing::TempDir dir;
  for (const char* name : {".checkpoint.pens.tmp-AbC123", ".model.json.tmp-x1y2z3", ".ckpt.tmp-1",
                           "ckpt.tmp-AbC123", "notes.txt", ".hidden"}) {
    std::ofstream(dir / name) << "x";
  }
  CHECK(remove_interrupted_writes(dir.path()) == 2);
  std::set<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) left.insert(entry.path().filename().string());
  CHECK(left == std::set<std::string>{".ckpt.tmp-1", "ckpt.tmp-AbC123", "notes.txt", ".hidden"});
}

TEST_CASE("corrupt, truncated and mismatched checkpoints are refused, naming the problem") {
  testing::TempDir dir;
  Run run;
  save_checkpoint(dir / "ckpt", {1, 2, {}}, run.params, run.state());
  const std::string good = read_file(dir / "ckpt", 1 << 24);
  Run target;
  auto load = [&](const std::string& bytes) {
    write_file_atomically(dir / "bad", bytes);
    return load_checkpoint(dir / "bad", target.params, target.state());
  };
  CHECK_ERROR_MENTIONS(load(good.substr(0, good.size() - 8)), "bad", "payload of", "truncated");
  CHECK_ERROR_MENTIONS(load(good.substr(0, 40)), "no checkpoint header");
  std::string flipped = good;
  flipped[flipped.size() - 3] ^= 0x01;
  CHECK_ERROR_MENTIONS(load(flipped), "does not match its checksum");
  CHECK_ERROR_MENTIONS(load("{\"format\": \"something else\"}\n"), "not a pens checkpoint");
  CHECK_ERROR_MENTIONS(load("not json at all\n"), "header is not valid JSON");

  // A checkpoint of another model.
  const Graph other = build_mlp({.layers = {8, 15, 3}});
  ParamStore<float> other_params(other);
  const auto other_sgd = make_optimizer("sgd", other_params);
  CHECK_ERROR_MENTIONS(load_checkpoint(dir / "ckpt", other_params, other_sgd->checkpoint_state()), "another model");

  // A checkpoint of another optimizer.
  Run adagrad("adagrad");
  CHECK_ERROR_MENTIONS(load_checkpoint(dir / "ckpt", adagrad.params, adagrad.state()), "optimizer 'sgd'",
                       "this run's optimizer is 'adagrad'");
  CHECK_ERROR_MENTIONS(load(std::string(good).replace(good.find("\"version\":2"), 11, "\"version\":7")),
                       "checkpoint version 7");
  const size_t elapsed = good.find("\"elapsed_seconds\":0");
  REQUIRE(elapsed != std::string::npos);
  CHECK_ERROR_MENTIONS(load(std::string(good).replace(elapsed, 19, "\"elapsed_seconds\":-1")),
                       "'elapsed_seconds' must be a non-negative number");
  // Files written before pens kept the run's clock have no field: the clock starts at 0.
  const std::string without = std::string(good).replace(elapsed, good.find(',', elapsed) + 1 - elapsed, "");
  CHECK(load(without).elapsed_seconds == 0);
}

TEST_CASE("a checkpoint of format 1 (before optimizers had names) loads as SGD state") {
  // Written by pens before this format: W1, b1, W2, b2 of a 4-3-2 MLP valued 0.01, 0.02,
  // ... in order, and their SGD momentum -0.001, -0.002, ...
  const std::string dir = pens::testing::source_dir() + "/tests/data/checkpoints/";
  const Model model = load_model(dir + "mlp-4-3-2.model.json");
  ParamStore<float> params(model.graph);
  const auto sgd = make_optimizer("sgd", params);
  const TrainingState state = load_checkpoint(dir + "v1-mlp-4-3-2.pens", params, sgd->checkpoint_state());
  CHECK(state.version == 1);
  CHECK(state.step == 42);
  CHECK(state.seed == 7);
  int k = 0;
  const auto velocity = sgd->state().at(0).values;
  for (const ParamEntry& e : params.entries()) {
    for (int64_t i = 0; i < e.shape.numel(); ++i) {
      ++k;
      CHECK(params.values()[static_cast<size_t>(e.offset + i)] == 0.01f * static_cast<float>(k));
      CHECK(velocity[static_cast<size_t>(e.offset + i)] == -0.001f * static_cast<float>(k));
    }
  }
  CHECK(k == 23);
  // Format 1 knew SGD only.
  ParamStore<float> other(model.graph);
  const auto adagrad = make_optimizer("adagrad", other);
  CHECK_ERROR_MENTIONS(load_checkpoint(dir + "v1-mlp-4-3-2.pens", other, adagrad->checkpoint_state()),
                       "optimizer 'sgd'", "'adagrad'");
}

}  // namespace test_checkpoint
