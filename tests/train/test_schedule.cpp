// Schedules: learning rate, momentum and λ stages by epoch, and the λ constants they
// write into a pseudo-ensemble's graph between steps.
#include <doctest/doctest.h>

#include "pens/autodiff/tape.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/mlp.h"
#include "pens/train/optim/schedule.h"
#include "tests/support/helpers.h"

namespace test_schedule {

using namespace pens;

namespace {

// The authors' learning rate and momentum schedule, with a faster decay (0.9 an epoch).
Schedule authors_schedule() {
  return {.learning_rate = 0.1,
          .warmup_epochs = 5,
          .decay = 0.9,
          .momentum_start = 0.5,
          .momentum_end = 0.99,
          .momentum_epochs = 500};
}

}  // namespace

TEST_CASE("the learning rate warms up and decays, the momentum ramps, lambda follows its stages") {
  Schedule s = authors_schedule();
  s.lambda_stages = {{5, 0.0}, {10, 1.0}, {10, 1.5}, {15, 2.0}, {70, 3.0}};
  CHECK(s.learning_rate_at(0) == 0.0);
  CHECK(s.learning_rate_at(2.5) == doctest::Approx(0.05 * std::pow(0.9, 2.5)));
  CHECK(s.learning_rate_at(10) == doctest::Approx(0.1 * std::pow(0.9, 10)));
  CHECK(s.momentum_at(0) == 0.5);
  CHECK(s.momentum_at(250) == doctest::Approx(0.745));
  CHECK(s.momentum_at(900) == doctest::Approx(0.99));
  CHECK(s.lambda_scale_at(0) == 0.0);
  CHECK(s.lambda_scale_at(4.9) == 0.0);
  CHECK(s.lambda_scale_at(5) == 1.0);
  CHECK(s.lambda_scale_at(26) == 2.0);
  CHECK(s.lambda_scale_at(500) == 3.0);  // the last stage holds
  CHECK(Schedule{}.lambda_scale_at(3) == 1.0);
  const OptimizerStep u = s.at(12, 10);
  CHECK(u.step == 12);
  CHECK(u.learning_rate == s.learning_rate_at(10));
  CHECK(u.momentum == s.momentum_at(10));
}

TEST_CASE("annealing holds the rate, then brings it linearly to zero, where it stays") {
  const Schedule s{.learning_rate = 0.002, .decay = 0.99, .anneal_start_epoch = 100, .anneal_end_epoch = 150};
  CHECK(s.learning_rate_at(50) == doctest::Approx(0.002 * std::pow(0.99, 50)));
  CHECK(s.learning_rate_at(100) == doctest::Approx(0.002 * std::pow(0.99, 100)));
  CHECK(s.learning_rate_at(110) == doctest::Approx(0.002 * std::pow(0.99, 110) * 0.8));
  CHECK(s.learning_rate_at(140) == doctest::Approx(0.002 * std::pow(0.99, 140) * 0.2));
  CHECK(s.learning_rate_at(150) == 0.0);
  CHECK(s.learning_rate_at(170) == 0.0);
  // From a restart, τ counts from the restart's epoch.
  Schedule r = s;
  r.decay = 1;
  r.restarts = {{.epoch = 20}};
  CHECK(r.learning_rate_at(120) == doctest::Approx(0.002));
  CHECK(r.learning_rate_at(145) == doctest::Approx(0.002 * 0.5));
}

TEST_CASE("a decay that starts at an epoch leaves the rate alone before it, restarts or not") {
  // The authors' tree runs: AdaGrad restarted every 9 epochs before epoch 250, the rate
  // times 0.99 per epoch from 250 on.
  Schedule s{.learning_rate = 0.01, .decay = 0.99, .decay_start_epoch = 250};
  s.restarts = periodic_restarts(9, 250, 400);
  CHECK(s.origin_at(249) == 243);
  CHECK(s.learning_rate_at(0) == 0.01);
  CHECK(s.learning_rate_at(100.5) == 0.01);
  CHECK(s.learning_rate_at(249.9) == 0.01);
  CHECK(s.learning_rate_at(250) == doctest::Approx(0.01));
  CHECK(s.learning_rate_at(251) == doctest::Approx(0.01 * 0.99));
  CHECK(s.learning_rate_at(399.5) == doctest::Approx(0.01 * std::pow(0.99, 149.5)));
  // A restart after the start takes the decay's clock back to the restart, as before.
  Schedule late = s;
  late.restarts = {{.epoch = 300}};
  CHECK(late.learning_rate_at(299) == doctest::Approx(0.01 * std::pow(0.99, 49)));
  CHECK(late.learning_rate_at(310) == doctest::Approx(0.01 * std::pow(0.99, 10)));
  // Without a start the decay counts from the run's start, as it always has.
  s.decay_start_epoch = 0;
  s.restarts.clear();
  CHECK(s.learning_rate_at(20) == doctest::Approx(0.01 * std::pow(0.99, 20)));
}

TEST_CASE("a restart starts the warm-up, decay and momentum ramp again, from its own learning rate") {
  Schedule s = authors_schedule();
  s.restarts = {{.epoch = 10}, {.epoch = 40, .learning_rate = 0.05}};
  CHECK(s.origin_at(9.99) == 0);
  CHECK(s.origin_at(10) == 10);
  CHECK(s.origin_at(39) == 10);
  CHECK(s.origin_at(400) == 40);
  CHECK(s.learning_rate_at(9) == doctest::Approx(0.1 * std::pow(0.9, 9)));
  CHECK(s.learning_rate_at(10) == 0.0);  // warming up again
  CHECK(s.learning_rate_at(12.5) == doctest::Approx(0.05 * std::pow(0.9, 2.5)));
  CHECK(s.learning_rate_at(20) == doctest::Approx(0.1 * std::pow(0.9, 10)));
  CHECK(s.learning_rate_at(50) == doctest::Approx(0.05 * std::pow(0.9, 10)));
  CHECK(s.momentum_at(9) == doctest::Approx(0.5 + 0.49 * 9 / 500));
  CHECK(s.momentum_at(10) == 0.5);
  CHECK(s.momentum_at(290) == doctest::Approx(0.745));
}

TEST_CASE("periodic restarts, and the step a run reads them at") {
  const auto epochs = [](const std::vector<Restart>& r) {
    std::vector<double> out;
    for (const Restart& x : r) out.push_back(x.epoch);
    return out;
  };
  CHECK(epochs(periodic_restarts(9, 250, 400)).size() == 27);  // 9, 18, ..., 243: the authors' tree runs
  CHECK(epochs(periodic_restarts(9, 250, 400)).back() == 243);
  CHECK(epochs(periodic_restarts(2, 0, 7)) == std::vector<double>{2, 4, 6});
  CHECK(epochs(periodic_restarts(2, 4, 7)) == std::vector<double>{2});  // the one at 4 is not before 4
  CHECK(periodic_restarts(0, 0, 7).empty());
  Schedule s;
  s.learning_rate = 0.5;
  s.decay = 0.5;
  s.restarts = periodic_restarts(2, 0, 5);
  // 3 steps an epoch: the restart at epoch 2 falls on step 6, whose update is the period's first.
  CHECK_FALSE(planned_step(s, 5, 3).restart);
  const PlannedStep at = planned_step(s, 6, 3);
  CHECK(at.restart);
  CHECK(at.update.step == 0);
  CHECK(at.update.learning_rate == 0.5);
  CHECK(planned_step(s, 7, 3).update.step == 1);
  CHECK(planned_step(s, 3, 3).update.learning_rate == 0.25);  // decayed by one epoch
}

TEST_CASE("penalty weights follow the schedule through the handles the passes return") {
  const Graph parent = build_mlp({.layers = {6, 5, 3}, .weight_std = 0.7, .mask_input = 0.2, .mask_hidden = 0.5});
  PseudoEnsembleSpec spec;
  spec.penalties = {{"logits", "xent", 1.0, "all"}, {"h1", "direction", 0.5, "all"}};
  const PseudoEnsemble ensemble = build_pseudo_ensemble(parent, spec);
  ParamStore<float> params(ensemble.graph);
  params.initialize(ensemble.graph, 1);
  Tape<float> tape(ensemble.graph, params, {.batch = 3});
  auto x = tape.input("x");
  for (int64_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i % 7);
  tape.set_noise_key({1, 1});
  tape.forward();
  const double penalties = tape.value(ensemble.penalties[0].value)[0] + tape.value(ensemble.penalties[1].value)[0];
  const double all = tape.objective();
  REQUIRE(penalties > 0);

  PenaltyWeights weights(ensemble.penalties);
  weights.set(tape, 0.0);
  tape.forward();
  CHECK(tape.objective() == doctest::Approx(all - penalties));
  weights.set(tape, 2.0);
  tape.forward();
  CHECK(tape.value(ensemble.penalties[1].lambda)[0] == 1.0f);  // 0.5 × 2
  CHECK(tape.objective() == doctest::Approx(all + penalties));
  CHECK_ERROR_MENTIONS(tape.set_constant("W1", 1.0f), "'W1' is not a constant");

  // A term the stages do not scale keeps its λ at every scale.
  std::vector<PenaltyHandle> handles = ensemble.penalties;
  handles[1].term.scheduled = false;
  PenaltyWeights partly(handles);
  for (const double scale : {0.0, 3.0}) {
    partly.set(tape, scale);
    CHECK(tape.value(ensemble.penalties[0].lambda)[0] == static_cast<float>(scale));
    CHECK(tape.value(ensemble.penalties[1].lambda)[0] == 0.5f);
  }
}

}  // namespace test_schedule
