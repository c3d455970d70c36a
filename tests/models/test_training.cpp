#include <doctest/doctest.h>

#include "autodiff/tape.h"
#include "models/mlp.h"
#include "models/optimizer.h"
#include "models/synthetic.h"
#include "tests/support/helpers.h"

using namespace pens;

TEST_CASE("the synthetic teacher task is deterministic and uses every class") {
  const Dataset a = make_teacher_task(500, 10, 4, 1);
  const Dataset b = make_teacher_task(500, 10, 4, 1);
  CHECK(a.x == b.x);
  CHECK(a.y == b.y);
  CHECK(make_teacher_task(500, 10, 4, 2).x != a.x);
  std::vector<int> counts(4, 0);
  for (float y : a.y) counts[static_cast<size_t>(y)]++;
  for (int c : counts) CHECK(c > 500 / 4 / 3);  // no class starved
}

TEST_CASE("SGD with the authors' momentum form, then the max-norm constraint") {
  Graph g;
  g.param("W", {2, 2}, {{"init", std::string("constant")}, {"value", 1.0}, {"max_norm", 1.0}});
  g.param("b", {2}, {{"init", std::string("constant")}, {"value", 1.0}});
  ParamStore<float> params(g);
  params.initialize(g, 0);
  Sgd sgd(g, params);
  params.grad("b")[0] = 1.0f;
  sgd.step(0.1, 0.5);  // m = 0.5 * 0 + 0.5 * 1 = 0.5; b = 1 - 0.1 * 0.5
  CHECK(params.value("b")[0] == doctest::Approx(0.95));
  CHECK(params.value("b")[1] == doctest::Approx(1.0));
  sgd.step(0.1, 0.5);  // m = 0.25 + 0.5 = 0.75; b = 0.95 - 0.075
  CHECK(params.value("b")[0] == doctest::Approx(0.875));
  // W's columns had norm sqrt(2) > 1: rescaled to norm 1.
  auto w = params.value("W").mat();
  for (int j = 0; j < 2; ++j) CHECK(w.col(j).norm() == doctest::Approx(1.0));
  CHECK(w(0, 0) == doctest::Approx(1 / std::sqrt(2.0)));

  Graph bad;
  bad.param("v", {3}, {{"max_norm", 2.0}});
  ParamStore<float> bad_params(bad);
  CHECK_ERROR_MENTIONS(Sgd(bad, bad_params), "parameter 'v'", "max_norm needs a matrix");
}

TEST_CASE("training an MLP with dropout on the teacher task lowers its loss and error") {
  const Dataset train = make_teacher_task(2000, 16, 4, 1);
  const Dataset test = make_teacher_task(1000, 16, 4, 2);
  const Graph g = build_mlp({.layers = {16, 64, 64, 4},
                             .input_dropout = 0.1,
                             .hidden_dropout = 0.2,
                             .weight_std = 0.1,
                             .max_norm = 3.5});
  ParamStore<float> params(g);
  params.initialize(g, 1);
  Sgd sgd(g, params);
  Tape<float> step(g, params, {.batch = 50});

  const Graph eval_graph = build_mlp({.layers = {16, 64, 64, 4}});  // same parameters, no dropout
  Tape<float> eval(eval_graph, params, {.batch = test.size});
  auto test_error = [&] {
    copy_batch(test, 0, eval.input("x"), eval.input("y"));
    eval.forward();
    return error_rate(test, eval.value("logits"));
  };

  const double error_before = test_error();
  std::vector<double> epoch_loss;
  uint64_t n = 0;
  for (int epoch = 0; epoch < 15; ++epoch) {
    double total = 0;
    for (int64_t first = 0; first < train.size; first += 50, ++n) {
      copy_batch(train, first, step.input("x"), step.input("y"));
      step.set_noise_key({3, n});
      params.zero_grad();
      step.forward();
      step.backward();
      sgd.step(0.1, 0.9);
      total += step.objective();
    }
    epoch_loss.push_back(total / (static_cast<double>(train.size) / 50));
  }
  const double error_after = test_error();
  MESSAGE("loss " << epoch_loss.front() << " -> " << epoch_loss.back() << ", test error "
                  << error_before << " -> " << error_after);
  CHECK(epoch_loss.back() < 0.6 * epoch_loss.front());
  CHECK(error_after < 0.5 * error_before);
  CHECK(error_after < 0.25);
}
