// Checkpoints: atomic, validated, and a resumed run equal to an uninterrupted one.
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <filesystem>

#include "autodiff/tape.h"
#include "models/mlp.h"
#include "models/optimizer.h"
#include "models/synthetic.h"
#include "serialization/checkpoint.h"
#include "serialization/files.h"
#include "tests/support/helpers.h"
#include "tests/support/temp_dir.h"

using namespace pens;

namespace {

// A training run whose every step is a function of (parameters, momentum, step): the
// batch is chosen by the step, the noise key is {seed, step}.
struct Run {
  Graph graph = build_mlp({.layers = {8, 16, 3}, .input_dropout = 0.2, .hidden_dropout = 0.5,
                           .weight_std = 0.3, .max_norm = 2.0});
  Dataset data = make_teacher_task(200, 8, 3, 5);
  ParamStore<float> params{graph};
  Sgd sgd{graph, params};
  Tape<float> tape{graph, params, {.batch = 20}};
  uint64_t seed = 99;

  Run() { params.initialize(graph, 1); }
  void steps(int64_t from, int64_t to) {
    for (int64_t step = from; step < to; ++step) {
      copy_batch(data, step * 20, tape.input("x"), tape.input("y"));
      tape.set_noise_key({seed, static_cast<uint64_t>(step)});
      params.zero_grad();
      tape.forward();
      tape.backward();
      sgd.step(0.1, std::min(0.9, 0.5 + 0.01 * static_cast<double>(step)));
    }
  }
};

}  // namespace

TEST_CASE("resume: N steps straight equal N/2 steps, a checkpoint, a fresh process state, N/2 steps") {
  const int threads = Eigen::nbThreads();
  Eigen::setNbThreads(1);
  testing::TempDir dir;
  const int64_t n = 40;
  Run straight;
  straight.steps(0, n);

  Run first_half;
  first_half.steps(0, n / 2);
  const TrainingState state{n / 2, first_half.seed, {{"epochs", 4}, {"lr", 0.1}}};
  save_checkpoint(dir / "ckpt", state, first_half.params, first_half.sgd);

  Run resumed;  // new parameters, optimizer and tape, as in a new process
  resumed.seed = 0;
  const TrainingState loaded = load_checkpoint(dir / "ckpt", resumed.params, resumed.sgd);
  CHECK(loaded == state);
  resumed.seed = loaded.seed;
  resumed.steps(loaded.step, n);

  CHECK(std::equal(resumed.params.values().begin(), resumed.params.values().end(),
                   straight.params.values().begin()));
  CHECK(std::equal(resumed.sgd.state().begin(), resumed.sgd.state().end(), straight.sgd.state().begin()));
  // And the run did move: the comparison is not between two untouched models.
  Run untouched;
  CHECK_FALSE(std::equal(untouched.params.values().begin(), untouched.params.values().end(),
                         straight.params.values().begin()));
  Eigen::setNbThreads(threads);
}

TEST_CASE("a writer killed between write and rename leaves the previous checkpoint loadable") {
  testing::TempDir dir;
  Run run;
  run.steps(0, 3);
  save_checkpoint(dir / "ckpt", {3, run.seed, {}}, run.params, run.sgd);
  const std::vector<float> saved(run.params.values().begin(), run.params.values().end());
  run.steps(3, 6);
  CHECK_THROWS_AS(save_checkpoint(dir / "ckpt", {6, run.seed, {}}, run.params, run.sgd,
                                  [] { throw Error("killed between write and rename"); }),
                  Error);
  Run fresh;
  const TrainingState s = load_checkpoint(dir / "ckpt", fresh.params, fresh.sgd);
  CHECK(s.step == 3);
  CHECK(std::equal(saved.begin(), saved.end(), fresh.params.values().begin()));
}

TEST_CASE("corrupt, truncated and mismatched checkpoints are refused, naming the problem") {
  testing::TempDir dir;
  Run run;
  save_checkpoint(dir / "ckpt", {1, 2, {}}, run.params, run.sgd);
  const std::string good = read_file(dir / "ckpt", 1 << 24);
  Run target;
  auto load = [&](const std::string& bytes) {
    write_file_atomically(dir / "bad", bytes);
    return load_checkpoint(dir / "bad", target.params, target.sgd);
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
  Sgd other_sgd(other, other_params);
  CHECK_ERROR_MENTIONS(load_checkpoint(dir / "ckpt", other_params, other_sgd), "another model");
}
