// The training step and what it runs: optimizers (each update against a hand-computed
// one), constraints, the order of the stages, gradient hooks, several graphs in one
// step, and a non-finite objective; and a short training run that learns.
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/models/mlp.h"
#include "pens/models/synthetic.h"
#include "pens/ops/parallel.h"
#include "pens/ops/random.h"
#include "pens/train/loop/step.h"
#include "pens/train/optim/constraints.h"
#include "pens/train/optim/groups.h"
#include "pens/train/optim/optimizer.h"
#include "tests/support/alloc_counter.h"
#include "tests/support/helpers.h"

namespace test_step {

using namespace pens;

namespace {

// A gradient transform that shows a test the summed gradients the optimizer is about to get.
struct SeeGradients : GradientTransform {
  explicit SeeGradients(std::function<void(ParamStore<float>&)> f) : see(std::move(f)) {}
  void apply(ParamStore<float>& params, const OptimizerStep& /*at*/) override { see(params); }
  std::function<void(ParamStore<float>&)> see;
};

// W [2, 2] and b [2], all ones.
Graph two_params(Attributes w_extra = {}) {
  Graph g;
  Attributes w{{"init", std::string("constant")}, {"value", 1.0}};
  for (const auto& [k, v] : w_extra.items()) w.set(k, v);
  g.param("W", {2, 2}, w);
  g.param("b", {2}, {{"init", std::string("constant")}, {"value", 1.0}});
  return g;
}

// A 3-2 softmax regression on fixed inputs: something with a real gradient.
Graph regression() {
  Graph g;
  const NodeId x = g.input("x", {kBatch, 3});
  const NodeId y = g.input("y", {kBatch}, DType::Index);
  const NodeId w = g.param("W", {3, 2}, {{"init", std::string("normal")}, {"std", 0.5}});
  const NodeId b = g.param("b", {2});
  const NodeId logits = g.add("affine", {x, w, b}, {}, "logits");
  g.set_flag(logits, kOutput);
  g.set_flag(g.add("mean", {g.add("softmax_xent", {logits, y})}, {}, "loss"), kLoss);
  return g;
}

void feed_regression(Tape<float>& tape, size_t) {
  auto x = tape.input("x");
  for (int64_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i) + 0.2f);
  auto y = tape.input("y");
  for (int64_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 2);
}

// The regression's gradient at the store's values, from one forward and backward pass of
// its own (the store's gradient left at it).
std::vector<float> regression_gradient(const Graph& g, ParamStore<float>& params) {
  Tape<float> reference(g, params, {.batch = 4});
  feed_regression(reference, 0);
  params.zero_grad();
  reference.forward();
  reference.backward();
  return {params.grads().begin(), params.grads().end()};
}

}  // namespace

TEST_CASE("SGD with the authors' momentum form") {
  const Graph g = two_params();
  ParamStore<float> params(g);
  params.initialize(g, 0);
  const auto sgd = make_optimizer("sgd", params);
  CHECK(sgd->kind() == "sgd");
  params.grad("b")[0] = 1.0f;
  sgd->step({.step = 0, .learning_rate = 0.1, .momentum = 0.5});  // m = 0.5 * 0 + 0.5 * 1 = 0.5; b = 1 - 0.1 * 0.5
  CHECK(params.value("b")[0] == doctest::Approx(0.95));
  CHECK(params.value("b")[1] == doctest::Approx(1.0));
  sgd->step({.step = 1, .learning_rate = 0.1, .momentum = 0.5});  // m = 0.25 + 0.5 = 0.75; b = 0.95 - 0.075
  CHECK(params.value("b")[0] == doctest::Approx(0.875));
  const auto state = sgd->state();
  REQUIRE(state.size() == 1);
  CHECK(state[0].name == "velocity");
  CHECK(state[0].values[params.at("b").offset] == doctest::Approx(0.75));
}

TEST_CASE("AdaGrad: G += g^2, theta -= eta g / (sqrt(G) + epsilon), by hand") {
  const Graph g = two_params();
  ParamStore<float> params(g);
  params.initialize(g, 0);
  const auto adagrad = make_optimizer("adagrad", params, {{"epsilon", 0.5}, {"initial_accumulator", 1.0}});
  CHECK(adagrad->kind() == "adagrad");
  auto grad = params.grad("b");
  grad[0] = 3.0f;
  grad[1] = -1.0f;
  adagrad->step({.step = 0, .learning_rate = 0.2});
  // G = 1 + 9 = 10: b0 = 1 - 0.2 * 3 / (sqrt(10) + 0.5); G = 1 + 1 = 2: b1 = 1 + 0.2 / (sqrt(2) + 0.5)
  const double b0 = 1 - 0.2 * 3 / (std::sqrt(10.0) + 0.5), b1 = 1 + 0.2 / (std::sqrt(2.0) + 0.5);
  CHECK(params.value("b")[0] == doctest::Approx(b0).epsilon(1e-6));
  CHECK(params.value("b")[1] == doctest::Approx(b1).epsilon(1e-6));
  grad[0] = 1.0f;
  grad[1] = 0.0f;
  adagrad->step({.step = 1, .learning_rate = 0.2, .momentum = 0.9});  // momentum is not AdaGrad's: ignored
  // G = 11: b0 -= 0.2 / (sqrt(11) + 0.5); a zero gradient leaves b1 where it was.
  CHECK(params.value("b")[0] == doctest::Approx(b0 - 0.2 / (std::sqrt(11.0) + 0.5)).epsilon(1e-6));
  CHECK(params.value("b")[1] == doctest::Approx(b1).epsilon(1e-6));
  CHECK(params.value("W")[0] == 1.0f);  // no gradient, no change
  const auto state = adagrad->state();
  REQUIRE(state.size() == 1);
  CHECK(state[0].name == "sum_squares");
  CHECK(state[0].values[params.at("b").offset] == doctest::Approx(11.0));

  // Defaults: epsilon 1e-8, G from 0, so the first step moves each weight by about eta.
  ParamStore<float> fresh(g);
  fresh.initialize(g, 0);
  const auto plain = make_optimizer("adagrad", fresh);
  fresh.grad("b")[0] = 4.0f;
  plain->step({.step = 0, .learning_rate = 0.1});
  CHECK(fresh.value("b")[0] == doctest::Approx(0.9).epsilon(1e-6));
}

TEST_CASE("optimizer groups: a group's parameters take its kind, rate and momentum; the rest the run's") {
  Graph g = two_params();
  g.param("E", {40000}, {{"init", std::string("constant")}, {"value", 1.0}});  // past one thread's range
  ParamStore<float> grouped(g), plain(g), alone(g);
  for (ParamStore<float>* p : {&grouped, &plain, &alone}) {
    p->initialize(g, 0);
    for (size_t i = 0; i < p->grads().size(); ++i) p->grads()[i] = std::sin(0.37f * static_cast<float>(i));
  }
  // AdaGrad at 0.05 for W and b, plain SGD at 0.1 for E (Tai et al.'s Tree-LSTM).
  const auto optimizer = make_optimizer_with_groups("adagrad", {}, 0.05,
                                                    {{.params = {"E"}, .kind = "sgd", .learning_rate = 0.1}}, grouped);
  CHECK(optimizer->kind() == "adagrad+groups");
  CHECK(describe_groups({{.params = {"E"}, .kind = "sgd", .learning_rate = 0.1}}) == " (E on sgd at 0.1)");
  CHECK(describe_groups({}).empty());
  const auto adagrad = make_optimizer("adagrad", plain);
  const auto sgd = make_optimizer("sgd", alone);
  const int saved_threads = threads();
  set_threads(2);
  for (int64_t t = 0; t < 3; ++t) {
    // The schedule at half its base rate, with momentum: the group's rate halves too, its momentum stays 0.
    optimizer->step({.step = t, .learning_rate = 0.025, .momentum = 0.9});
    adagrad->step({.step = t, .learning_rate = 0.025, .momentum = 0.9});
    sgd->step({.step = t, .learning_rate = 0.05, .momentum = 0});
  }
  set_threads(saved_threads);
  for (const char* name : {"W", "b"}) {
    const auto got = grouped.value(name), want = plain.value(name);
    for (int64_t i = 0; i < got.size(); ++i) CHECK(got[i] == want[i]);
  }
  const auto got = grouped.value("E"), want = alone.value("E");
  int64_t differ = 0;
  for (int64_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
  CHECK(differ == 0);
  CHECK(got[1] != 1.0f);  // E moved
  // The state: the run optimizer's buffers as they are, the group's under its number.
  std::vector<std::string> names;
  for (const StateBuffer& b : optimizer->state()) names.push_back(b.name);
  CHECK(names == std::vector<std::string>{"sum_squares", "group1/velocity"});
  // Ranges cut anywhere give the same bits (a constraint updates block by block).
  CHECK(optimizer->elementwise());

  SUBCASE("bad groups are errors that name them") {
    const auto error_of = [&](std::vector<OptimizerGroup> groups) {
      try {
        make_optimizer_with_groups("adagrad", {}, 0.05, groups, grouped);
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::string();
    };
    CHECK(error_of({{.params = {"F"}}}).find("optimizer.groups[0].params: the model has no parameter 'F'") !=
          std::string::npos);
    CHECK(error_of({{.params = {"E"}}, {.params = {"W", "E"}}}).find("'E' is already in optimizer.groups[0]") !=
          std::string::npos);
    CHECK(error_of({{.params = {"E"}, .kind = "lion"}}).find("optimizer.groups[0]") != std::string::npos);
  }
}

TEST_CASE("Adam: bias-corrected moments, by hand; the state saved by name") {
  const Graph g = two_params();
  ParamStore<float> params(g);
  params.initialize(g, 0);
  const auto adam = make_optimizer("adam", params, {{"beta1", 0.5}, {"beta2", 0.75}, {"epsilon", 1e-8}});
  CHECK(adam->kind() == "adam");
  auto grad = params.grad("b");
  grad[0] = 2.0f;
  grad[1] = -0.5f;
  adam->step({.step = 0, .learning_rate = 0.1, .momentum = 0.9});  // the schedule's momentum is not Adam's
  // t = 1: the corrected moments are g and g², so each weight moves by eta sign(g).
  CHECK(params.value("b")[0] == doctest::Approx(0.9).epsilon(1e-6));
  CHECK(params.value("b")[1] == doctest::Approx(1.1).epsilon(1e-6));
  grad[0] = 1.0f;
  adam->step({.step = 1, .learning_rate = 0.1});
  // t = 2: m = 0.5 (0.5 · 2) + 0.5 · 1 = 1, corrected 1 / 0.75; v = 0.75 (0.25 · 4) + 0.25 · 1 = 1,
  // corrected 1 / (1 - 0.5625).
  const double moved = 0.1 * (1.0 / 0.75) / std::sqrt(1.0 / (1 - 0.5625));
  CHECK(params.value("b")[0] == doctest::Approx(0.9 - moved).epsilon(1e-6));
  CHECK(params.value("W")[0] == 1.0f);  // no gradient, no change
  const auto state = adam->state();
  REQUIRE(state.size() == 2);
  CHECK(state[0].name == "mean");
  CHECK(state[1].name == "mean_square");
  CHECK(state[0].values[params.at("b").offset] == doctest::Approx(1.0));
  CHECK(state[1].values[params.at("b").offset] == doctest::Approx(1.0));
  CHECK_ERROR_MENTIONS(make_optimizer("adam", params, {{"epsilon", 0.0}}), "epsilon", "> 0");
  CHECK_ERROR_MENTIONS(make_optimizer("adam", params, {{"beta1", 1.0}}), "beta1", "in [0, 1)");
}

TEST_CASE("Adam: a bias correction that has reached 1 is skipped, with the bits of dividing by it") {
  // β1 0.5 and β2 0.75: the corrections 1 - β^t reach 1 in float at t = 25 and t = 61,
  // so 80 steps cover both divisions, the mean square's alone, and none.
  Graph g;
  g.param("w", {40000}, {{"init", std::string("normal")}, {"std", 1.0}});
  ParamStore<float> params(g);
  params.initialize(g, 5);
  const auto adam = make_optimizer("adam", params, {{"beta1", 0.5}, {"beta2", 0.75}, {"epsilon", 1e-8}});
  const auto w = params.value("w");
  Eigen::ArrayXf theta = Eigen::Map<const Eigen::ArrayXf>(w.data, w.size());
  Eigen::ArrayXf m = Eigen::ArrayXf::Zero(theta.size()), v = m, grad = m;
  const float b1 = 0.5f, b2 = 0.75f, eta = 0.01f, eps = 1e-8f;
  int differing_steps = 0;
  for (int64_t step = 0; step < 80; ++step) {
    for (Eigen::Index i = 0; i < grad.size(); ++i) grad[i] = std::cos(0.01f * static_cast<float>(i) + step);
    std::copy(grad.data(), grad.data() + grad.size(), params.grad("w").data);
    adam->step({.step = step, .learning_rate = eta});
    // The update with both divisions, always.
    const auto c1 = static_cast<float>(1.0 - std::pow(0.5, step + 1));
    const auto c2 = static_cast<float>(1.0 - std::pow(0.75, step + 1));
    m = b1 * m + (1.0f - b1) * grad;
    v = b2 * v + (1.0f - b2) * grad * grad;
    theta -= eta * (m / c1) / ((v / c2).sqrt() + eps);
    if (!std::equal(theta.data(), theta.data() + theta.size(), w.data)) ++differing_steps;
  }
  CHECK(differing_steps == 0);
}

TEST_CASE("a restarted optimizer continues as a newly made one: every kind's state back to its start") {
  const Graph g = two_params();
  for (const auto& item : std::vector<std::pair<std::string, Attributes>>{
           {"sgd", {}}, {"adagrad", {{"initial_accumulator", 0.5}}}, {"adam", {}}}) {
    const auto& kind = item.first;  // not bindings: doctest captures them (clang < 16)
    const auto& settings = item.second;
    INFO(kind);
    ParamStore<float> used(g), fresh(g);
    used.initialize(g, 0);
    fresh.initialize(g, 0);
    const auto a = make_optimizer(kind, used, settings), b = make_optimizer(kind, fresh, settings);
    used.grad("b")[0] = 2.0f;
    a->step({.step = 0, .learning_rate = 0.1, .momentum = 0.5});
    a->step({.step = 1, .learning_rate = 0.1, .momentum = 0.5});
    a->restart();
    // From the same values, the restarted and the new optimizer take the same next step.
    std::ranges::copy(used.values(), fresh.values().begin());
    used.grad("b")[0] = fresh.grad("b")[0] = -1.0f;
    a->step({.step = 0, .learning_rate = 0.1, .momentum = 0.5});
    b->step({.step = 0, .learning_rate = 0.1, .momentum = 0.5});
    const auto va = used.values(), vb = fresh.values();
    CHECK(std::equal(va.begin(), va.end(), vb.begin(), vb.end()));
    const auto sa = a->state(), sb = b->state();
    REQUIRE(sa.size() == sb.size());
    for (size_t i = 0; i < sa.size(); ++i) CHECK(std::ranges::equal(sa[i].values, sb[i].values));
  }
}

TEST_CASE("Adam over many chunks: the scalar rule to float rounding, the same bits on one thread and two") {
  // 300,001 elements: several of the update's chunks and a ragged last one.
  Graph g;
  g.param("w", {300001}, {{"init", std::string("normal")}, {"std", 1.0}});
  const int saved_threads = threads();
  // Three steps of Adam (the defaults, learning rate 0.01) from the same values and gradients.
  auto run = [&](int thread_count) {
    ParamStore<float> params(g);
    params.initialize(g, 3);
    set_threads(thread_count);
    const auto adam = make_optimizer("adam", params);
    auto grad = params.grad("w");
    for (int64_t step = 0; step < 3; ++step) {
      for (int64_t i = 0; i < grad.size(); ++i) grad[i] = std::sin(0.001f * static_cast<float>(i) + step) * 3.0f;
      adam->step({.step = step, .learning_rate = 0.01});
    }
    const auto w = params.value("w");
    return std::vector<float>(w.data, w.data + w.size());
  };
  const std::vector<float> one = run(1), two = run(2);
  set_threads(saved_threads);
  CHECK(one == two);

  ParamStore<float> start(g);
  start.initialize(g, 3);
  const auto w0 = start.value("w");
  std::vector<double> theta(w0.data, w0.data + w0.size()), m(theta.size(), 0.0), v(theta.size(), 0.0);
  // The rule in double, with the constants rounded to float as the optimizer holds them.
  const double b1 = 0.9f, b2 = 0.999f;
  for (int step = 0; step < 3; ++step) {
    const double c1 = static_cast<float>(1 - std::pow(0.9, step + 1));
    const double c2 = static_cast<float>(1 - std::pow(0.999, step + 1));
    for (size_t i = 0; i < theta.size(); ++i) {
      const double gi = std::sin(0.001f * static_cast<float>(i) + step) * 3.0f;
      m[i] = b1 * m[i] + (1 - b1) * gi;
      v[i] = b2 * v[i] + (1 - b2) * gi * gi;
      theta[i] -= double(0.01f) * (m[i] / c1) / (std::sqrt(v[i] / c2) + double(1e-8f));
    }
  }
  // Each step moves a weight by about the learning rate, so float rounding is relative
  // to the larger of the weight and the step.
  size_t off = 0;
  for (size_t i = 0; i < theta.size(); ++i) off += std::abs(two[i] - theta[i]) > 1e-6 * std::max(std::abs(theta[i]), 0.01);
  CHECK(off == 0);
}

TEST_CASE("optimizers by name: unknown kinds and bad settings are errors naming them") {
  const Graph g = two_params();
  ParamStore<float> params(g);
  CHECK_ERROR_MENTIONS(make_optimizer("adam-ish", params), "unknown optimizer 'adam-ish'", "adagrad", "adam", "sgd");
  CHECK_ERROR_MENTIONS(make_optimizer("adagrad", params, {{"eps", 0.1}}), "optimizer adagrad", "unknown attribute 'eps'");
  CHECK_ERROR_MENTIONS(make_optimizer("adagrad", params, {{"epsilon", -1.0}}), "epsilon", ">= 0");
  CHECK_ERROR_MENTIONS(make_optimizer("adagrad", params, {{"epsilon", 0.0}}), "both 0");
  CHECK_ERROR_MENTIONS(make_optimizer("sgd", params, {{"nesterov", int64_t{1}}}), "unknown attribute 'nesterov'");
}

TEST_CASE("max-norm: the paper's rule bounds columns, the authors' squared rows; only matrices") {
  Graph g = two_params({{"max_norm", 1.0}});
  ParamStore<float> params(g);
  params.initialize(g, 0);
  MaxNorm columns(g, params, MaxNormRule::UnitIncoming);
  columns.apply({});
  // W's columns had norm sqrt(2) > 1: rescaled to norm 1. b has no bound.
  auto w = params.value("W").mat();
  for (int j = 0; j < 2; ++j) CHECK(w.col(j).norm() == doctest::Approx(1.0));
  CHECK(w(0, 0) == doctest::Approx(1 / std::sqrt(2.0)));
  CHECK(params.value("b")[0] == 1.0f);

  const Graph net = build_mlp({.layers = {3, 2}, .max_norm = 2.0});
  ParamStore<float> p(net);
  p.value("W1").mat() << 3, 0, 1, 1, 0, 0.5;
  MaxNorm rows(net, p, MaxNormRule::InputOutgoingSquared);
  rows.apply({});
  auto w1 = p.value("W1").mat();
  CHECK(w1.row(0).squaredNorm() == doctest::Approx(2.0));
  CHECK(w1(1, 0) == 1.0f);  // squared norm 2: untouched
  CHECK(w1(2, 1) == 0.5f);

  Graph bad;
  bad.param("v", {3}, {{"max_norm", 2.0}});
  ParamStore<float> bad_params(bad);
  CHECK_ERROR_MENTIONS(MaxNorm(bad, bad_params, MaxNormRule::UnitIncoming), "parameter 'v'", "max_norm needs a matrix");
  CHECK_ERROR_MENTIONS(parse_max_norm_rule("rows"), "'rows'", "unit-incoming");
  CHECK(model_constraints(net, p, MaxNormRule::UnitIncoming).size() == 1);
  const Graph unbounded = regression();
  ParamStore<float> unbounded_params(unbounded);
  CHECK(model_constraints(unbounded, unbounded_params, MaxNormRule::UnitIncoming).empty());
}

TEST_CASE("max-norm on a matrix of many column and row blocks: the rules' values, the same bits on one thread and two") {
  // 300 × 1000 of std 0.1: column blocks (the matrix alone: one per thread), row blocks
  // of 16. Column norms are near 1.73 and rows' squared norms near 10, so each rule's
  // bound (1.75, 10) binds on part of them.
  const int saved_threads = threads();
  for (const auto& item : {std::pair{MaxNormRule::UnitIncoming, 1.75}, {MaxNormRule::InputOutgoingSquared, 10.0}}) {
    const auto& rule = item.first;  // not bindings: doctest captures them (clang < 16)
    const auto& bound = item.second;
    CAPTURE(bound);
    Graph g;
    g.param("W", {300, 1000}, {{"init", std::string("normal")}, {"std", 0.1}, {"max_norm", bound}});
    auto run = [&](int thread_count) {
      ParamStore<float> params(g);
      params.initialize(g, 5);
      set_threads(thread_count);
      MaxNorm(g, params, rule).apply({});
      const auto w = params.value("W");
      return std::vector<float>(w.data, w.data + w.size());
    };
    const std::vector<float> one = run(1), two = run(2);
    CHECK(one == two);
    // Against the rule computed in double: a column's norm over the bound scaled to it (a
    // row's squared norm over the bound scaled to it), the others untouched.
    ParamStore<float> start(g);
    start.initialize(g, 5);
    const auto w0 = start.value("W").mat();
    const bool columns = rule == MaxNormRule::UnitIncoming;
    const int64_t lines = columns ? w0.cols() : w0.rows();
    int64_t scaled = 0, off = 0;
    for (int64_t line = 0; line < lines; ++line) {
      const double size = columns ? w0.col(line).cast<double>().norm() : w0.row(line).cast<double>().squaredNorm();
      const double factor = size > bound ? (columns ? bound / size : std::sqrt(bound / size)) : 1.0;
      scaled += factor < 1.0;
      for (int64_t k = 0; k < (columns ? w0.rows() : w0.cols()); ++k) {
        const int64_t i = columns ? k : line, j = columns ? line : k;
        off += std::abs(one[static_cast<size_t>(i * w0.cols() + j)] - w0(i, j) * factor) > 1e-6;
      }
    }
    CHECK(scaled > lines / 10);  // the bound binds on part of the lines, not on all
    CHECK(scaled < lines - lines / 10);
    CHECK(off == 0);
  }
  set_threads(saved_threads);
}

TEST_CASE("the update fused into max-norm: the bits of the update and then the rule, both rules, a held matrix, one thread and two") {
  // Biases without a bound before, between and after two bounded matrices, so the fused
  // pass updates the store in stretches around them; gradients of std 0.3 and a learning
  // rate of 1 push the lines over their bounds.
  Graph g;
  g.param("a", {30}, {{"init", std::string("normal")}, {"std", 0.1}});
  g.param("W", {300, 1000}, {{"init", std::string("normal")}, {"std", 0.1}, {"max_norm", 1.6}});
  g.param("b", {1000}, {{"init", std::string("normal")}, {"std", 0.1}});
  g.param("V", {1000, 40}, {{"init", std::string("normal")}, {"std", 0.1}, {"max_norm", 3.5}});
  g.param("c", {20}, {{"init", std::string("normal")}, {"std", 0.1}});
  const int saved_threads = threads();
  for (const char* kind : {"sgd", "adagrad"}) {
    for (const MaxNormRule rule : {MaxNormRule::UnitIncoming, MaxNormRule::InputOutgoingSquared}) {
      for (const bool hold : {false, true}) {
        CAPTURE(kind);
        CAPTURE(hold);
        // Two updates, by `fused` or not; the values and the optimizer's state after them.
        auto run = [&](bool fused, int thread_count) {
          set_threads(thread_count);
          ParamStore<float> params(g);
          params.initialize(g, 7);
          const auto optimizer = make_optimizer(kind, params);
          std::vector<std::unique_ptr<Constraint>> constraints;
          constraints.push_back(std::make_unique<MaxNorm>(g, params, rule));
          std::vector<const ParamEntry*> held;
          if (hold) held.push_back(&params.at("W"));
          std::vector<float> out;
          for (int64_t step = 0; step < 2; ++step) {
            NoiseStream({.seed = 11, .step = static_cast<uint64_t>(step)}, 1)
                .normal(params.grads().data(), static_cast<int64_t>(params.grads().size()), 0.3f);
            const OptimizerStep update{.step = step, .learning_rate = 1.0, .momentum = 0.5};
            if (fused) {
              CHECK(constraints[0]->update_and_apply(*optimizer, update, held));
            } else {
              optimizer->step(update);
              constraints[0]->apply(held);
            }
          }
          out.assign(params.values().begin(), params.values().end());
          for (const StateBuffer& b : optimizer->state()) out.insert(out.end(), b.values.begin(), b.values.end());
          return out;
        };
        const std::vector<float> apart = run(false, 1);
        CHECK(run(true, 1) == apart);
        CHECK(run(true, 2) == apart);
      }
    }
  }
  set_threads(saved_threads);
  // Adam is not elementwise in pens' sense (its scalar and vector paths may round apart):
  // nothing fused, nothing done, and update_and_constrain runs the two passes.
  ParamStore<float> params(g);
  params.initialize(g, 7);
  {
    // The layout the stretches are meant to cover: an unbounded stretch first and last.
    const auto& e = params.entries();
    CHECK(std::ranges::min_element(e, {}, &ParamEntry::offset)->name == "a");
    CHECK(std::ranges::max_element(e, {}, &ParamEntry::offset)->name == "c");
  }
  const std::vector<float> before(params.values().begin(), params.values().end());
  const auto adam = make_optimizer("adam", params);
  CHECK_FALSE(adam->elementwise());
  CHECK_ERROR_MENTIONS(adam->step_range({.learning_rate = 0.1}, 0, 4), "adam", "whole store");
  MaxNorm bound(g, params, MaxNormRule::UnitIncoming);
  CHECK_FALSE(bound.update_and_apply(*adam, {.learning_rate = 0.1}, {}));
  CHECK(std::ranges::equal(params.values(), before));
}

TEST_CASE("a step: feed, key, forward, backward, the transforms of the summed gradient, the update, the constraint") {
  const Graph g = regression();
  ParamStore<float> params(g);
  params.initialize(g, 3);
  const auto sgd = make_optimizer("sgd", params);
  std::vector<std::string> order;
  struct Recorder : Constraint {
    std::vector<std::string>* order;
    void apply(std::span<const ParamEntry* const>) override { order->push_back("constraint"); }
  };
  std::vector<std::unique_ptr<Constraint>> constraints;
  auto recorder = std::make_unique<Recorder>();
  recorder->order = &order;
  constraints.push_back(std::move(recorder));
  Step step(params, *sgd, std::move(constraints), /*seed=*/5);
  Tape<float> tape(g, params, {.batch = 4});

  // The expected update, by hand: the gradient of one forward/backward, then SGD.
  Tape<float> reference(g, params, {.batch = 4});
  feed_regression(reference, 0);
  reference.forward();  // its objective, for the step's to match
  const std::vector<float> grad = regression_gradient(g, params);
  std::vector<float> expected(params.values().begin(), params.values().end());
  for (size_t i = 0; i < expected.size(); ++i) expected[i] -= 0.5f * (1.0f - 0.0f) * grad[i];
  params.zero_grad();
  params.grads()[0] = 123.0f;  // a stale gradient: the step must start from zero

  step.add_transform(std::make_unique<SeeGradients>([&](ParamStore<float>& p) {
    order.push_back("hook");
    CHECK(std::equal(p.grads().begin(), p.grads().end(), grad.begin()));
  }));
  const StepResult r = step.run({.step = 0, .learning_rate = 0.5, .momentum = 0.0}, tape, [&](Tape<float>& t, size_t i) {
    order.push_back("feed");
    CHECK(i == 0);
    feed_regression(t, i);
  });
  CHECK(r.finite);
  CHECK(r.objective == doctest::Approx(reference.objective()));
  CHECK(order == std::vector<std::string>{"feed", "hook", "constraint"});
  for (size_t i = 0; i < expected.size(); ++i) CHECK(params.values()[i] == doctest::Approx(expected[i]));
}

TEST_CASE("gradient transforms: l2 adds lambda theta; a hold zeroes its parameters' gradients in its epochs, after every transform, and the constraints skip them") {
  const Graph g = regression();
  ParamStore<float> params(g);
  params.initialize(g, 3);
  const auto sgd = make_optimizer("sgd", params);
  std::vector<size_t> skipped;  // how many parameters each constraint call was told to skip
  struct Recorder : Constraint {
    std::vector<size_t>* skipped;
    void apply(std::span<const ParamEntry* const> held) override { skipped->push_back(held.size()); }
  };
  std::vector<std::unique_ptr<Constraint>> constraints;
  auto recorder = std::make_unique<Recorder>();
  recorder->skipped = &skipped;
  constraints.push_back(std::move(recorder));
  Step step(params, *sgd, std::move(constraints), 5);
  step.add_transform(std::make_unique<L2Penalty>(params, std::map<std::string, double>{{"W", 0.5}}));
  step.add_transform(std::make_unique<HoldParameters>(std::vector<const ParamEntry*>{&params.at("b")}, 1.0, 2.0));
  std::vector<float> grads;
  step.add_transform(std::make_unique<SeeGradients>([&](ParamStore<float>& p) { grads.assign(p.grads().begin(), p.grads().end()); }));
  Tape<float> tape(g, params, {.batch = 4});

  // The gradient alone, for comparison.
  const std::vector<float> plain = regression_gradient(g, params);
  const std::vector<float> before(params.values().begin(), params.values().end());
  const ParamEntry& w = params.at("W");
  const ParamEntry& b = params.at("b");

  // Epoch 0.5: outside the hold; W's gradient has 0.5 W added.
  REQUIRE(step.run({.step = 0, .learning_rate = 0.0, .epoch = 0.5}, tape, feed_regression).finite);
  for (int64_t i = 0; i < w.shape.numel(); ++i) {
    const auto k = static_cast<size_t>(w.offset + i);
    CHECK(grads[k] == doctest::Approx(plain[k] + 0.5f * before[k]));
  }
  for (int64_t i = 0; i < b.shape.numel(); ++i) CHECK(grads[static_cast<size_t>(b.offset + i)] == plain[static_cast<size_t>(b.offset + i)]);
  // Epoch 1.5: b held (gradient zero, skipped by the constraint), and it stays put under SGD.
  const float b0 = params.value("b")[0];
  REQUIRE(step.run({.step = 1, .learning_rate = 0.1, .epoch = 1.5}, tape, feed_regression).finite);
  // The step zeroes a held gradient once every transform has run (a later l2 cannot move
  // it): the store's gradient, not what the transforms saw.
  for (int64_t i = 0; i < b.shape.numel(); ++i) CHECK(params.grad("b")[i] == 0.0f);
  CHECK(grads[static_cast<size_t>(b.offset)] != 0.0f);
  CHECK(params.value("b")[0] == b0);
  CHECK(skipped == std::vector<size_t>{0, 1});
  // Epoch 2: the hold has ended.
  REQUIRE(step.run({.step = 2, .learning_rate = 0.1, .epoch = 2.0}, tape, feed_regression).finite);
  CHECK(params.value("b")[0] != b0);
  CHECK(skipped.back() == 0);
  CHECK_THROWS_WITH_AS(L2Penalty(params, {{"V", 1.0}}), "l2.V: the model has no parameter 'V'", Error);
}

TEST_CASE("a step of several graphs adds their gradients and keys each graph's noise by its example") {
  // Dropout on the input: the draws show which key a graph ran with.
  Graph noisy;
  const NodeId x = noisy.input("x", {kBatch, 3});
  const NodeId y = noisy.input("y", {kBatch}, DType::Index);
  const NodeId dropped = noisy.add("dropout", {x}, {{"p", 0.5}}, "drop");
  const NodeId w = noisy.param("W", {3, 2}, {{"init", std::string("normal")}, {"std", 0.5}});
  const NodeId b = noisy.param("b", {2});
  const NodeId logits = noisy.add("affine", {dropped, w, b}, {}, "logits");
  noisy.set_flag(logits, kOutput);
  noisy.set_flag(noisy.add("mean", {noisy.add("softmax_xent", {logits, y})}, {}, "loss"), kLoss);

  ParamStore<float> params(noisy);
  params.initialize(noisy, 3);
  const auto sgd = make_optimizer("sgd", params);
  Step step(params, *sgd, {}, /*seed=*/9);
  Tape<float> a(noisy, params, {.batch = 64}), b_tape(noisy, params, {.batch = 64});
  std::vector<float> grads;
  step.add_transform(std::make_unique<SeeGradients>([&](ParamStore<float>& p) { grads.assign(p.grads().begin(), p.grads().end()); }));
  const StepGraph graphs[] = {{&a, 0}, {&b_tape, 1}};
  const StepResult r = step.run({.step = 7, .learning_rate = 0.0}, graphs, feed_regression);
  REQUIRE(r.finite);
  // Same inputs, different examples: different masks, so different objectives.
  CHECK(a.value("drop").arr().matrix() != b_tape.value("drop").arr().matrix());
  CHECK(r.objective == doctest::Approx(a.objective() + b_tape.objective()));
  // The summed gradient is the two graphs' gradients added.
  std::vector<float> sum(params.grads().size(), 0.0f);
  for (Tape<float>* t : {&a, &b_tape}) {
    params.zero_grad();
    t->backward();
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += params.grads()[i];
  }
  for (size_t i = 0; i < sum.size(); ++i) CHECK(grads[i] == doctest::Approx(sum[i]));
  // And each graph drew with {seed, step, example}: replaying graph 1's key alone
  // reproduces its mask.
  Tape<float> replay(noisy, params, {.batch = 64});
  feed_regression(replay, 0);
  replay.set_noise_key({9, 7, 1});
  replay.forward();
  CHECK(replay.value("drop").arr().matrix() == b_tape.value("drop").arr().matrix());
}

TEST_CASE("a step of several graphs moves each moving average once") {
  Graph g;
  const NodeId x = g.input("x", {kBatch, 3});
  const NodeId y = g.input("y", {kBatch}, DType::Index);
  const NodeId w = g.param("W", {3, 2}, {{"init", std::string("normal")}, {"std", 0.5}});
  const NodeId logits = g.add("matmul", {x, w}, {}, "logits");
  g.set_flag(logits, kOutput);
  g.set_flag(g.add("mean", {g.add("softmax_xent", {logits, y})}, {}, "loss"), kLoss);
  g.set_flag(g.param("W_average", {3, 2}), kFrozen);
  g.add_average({.param = "W_average", .source = "W", .decay = 0.5});
  ParamStore<float> params(g);
  params.initialize(g, 3);
  std::fill_n(params.value("W_average").data, 6, 0.0f);
  const auto sgd = make_optimizer("sgd", params);
  Step step(params, *sgd, {}, 9);
  Tape<float> a(g, params, {.batch = 64}), b(g, params, {.batch = 64});
  const StepGraph graphs[] = {{&a, 0}, {&b, 1}};
  REQUIRE(step.run({.step = 0, .learning_rate = 0.0}, graphs, feed_regression).finite);
  // W did not move (rate 0): one update takes the average halfway to it, two 3/4 of the way.
  for (int64_t i = 0; i < 6; ++i) CHECK(params.value("W_average")[i] == 0.5f * params.value("W")[i]);
}

TEST_CASE("a sharded step adds its shards' gradients pairwise, in one fixed order, and averages them") {
  // Enough parameters (a 8-16-4 network) that adding in another order changes some bits.
  const Graph g = build_mlp({.layers = {8, 16, 4}});
  ParamStore<float> params(g);
  params.initialize(g, 3);
  const auto sgd = make_optimizer("sgd", params);
  Step step(params, *sgd, {}, /*seed=*/4);
  // Shard k holds rows 3k .. 3k + 2 of a batch of 12: inputs that differ per shard.
  const auto feed_shard = [](Tape<float>& tape, size_t k) {
    auto x = tape.input("x");
    for (int64_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i + 24 * static_cast<int64_t>(k)));
    auto y = tape.input("y");
    for (int64_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>((i + static_cast<int64_t>(k)) % 4);
  };
  Tape<float> tape(g, params, {.batch = 3});
  // Each shard's gradient alone.
  std::vector<std::vector<float>> shard_grads;
  for (size_t k = 0; k < 4; ++k) {
    params.zero_grad();
    feed_shard(tape, k);
    tape.forward();
    tape.backward();
    shard_grads.emplace_back(params.grads().begin(), params.grads().end());
  }
  std::vector<float> seen;
  step.add_transform(std::make_unique<SeeGradients>([&](ParamStore<float>& p) { seen.assign(p.grads().begin(), p.grads().end()); }));
  const StepResult r = step.run_shards({.step = 0, .learning_rate = 0.0}, tape, 4, 0, 4, feed_shard);
  REQUIRE(r.finite);
  REQUIRE(seen.size() == shard_grads[0].size());
  int other_order_differs = 0;  // the check below can tell the orders apart
  for (size_t i = 0; i < seen.size(); ++i) {
    const float& a = shard_grads[0][i];
    const float& b = shard_grads[1][i];
    const float& c = shard_grads[2][i];
    const float& d = shard_grads[3][i];
    CHECK(seen[i] == ((a + b) + (c + d)) * 0.25f);  // bit for bit: this order
    other_order_differs += seen[i] != (((a + b) + c) + d) * 0.25f;
  }
  CHECK(other_order_differs > 0);
  // A subtree of the shards is what one of several processes computes; alone it is
  // refused unless it is a whole power-of-two subtree.
  CHECK_THROWS_WITH(step.run_shards({.step = 0}, tape, 4, 1, 2, feed_shard), doctest::Contains("a whole subtree"));
  CHECK_THROWS_WITH(step.run_shards({.step = 0}, tape, 3, 0, 3, feed_shard), doctest::Contains("a power of two"));
}

TEST_CASE("a training step allocates nothing: feed, noise, forward, backward, optimizer, max-norm") {
  if (!testing::CountAllocations::available()) return;  // AddressSanitizer owns malloc
  const int saved_threads = threads();
  const Graph g = build_mlp({.layers = {64, 128, 10}, .input_dropout = 0.2, .hidden_dropout = 0.5, .max_norm = 1.0});
  ParamStore<float> params(g);
  params.initialize(g, 1);
  Tape<float> tape(g, params, {.batch = 32});
  for (const auto& item : {std::pair{"sgd", 1}, {"adagrad", 1}, {"sgd", 2}}) {
    const auto& kind = item.first;  // not bindings: doctest captures them (clang < 16)
    const auto& thread_count = item.second;
    INFO(kind << " on " << thread_count << " threads");
    set_threads(thread_count);
    const auto optimizer = make_optimizer(kind, params);
    Step step(params, *optimizer, model_constraints(g, params, MaxNormRule::UnitIncoming), /*seed=*/2);
    int64_t hooked = 0;
    step.add_transform(std::make_unique<SeeGradients>([&](ParamStore<float>&) { ++hooked; }));
    const Step::Feed feed = [](Tape<float>& t, size_t i) { feed_regression(t, i); };
    step.run({.step = 0, .learning_rate = 0.01, .momentum = 0.5}, tape, feed);  // anything lazy settles
    bool finite = true;
    int64_t allocations = 0;
    {
      testing::CountAllocations count;
      for (int64_t n = 1; n <= 5; ++n) {
        finite = step.run({.step = n, .learning_rate = 0.01, .momentum = 0.5}, tape, feed).finite && finite;
      }
      allocations = count.count();
    }
    CHECK(finite);
    CHECK(allocations == 0);
    CHECK(hooked == 6);
  }
  set_threads(saved_threads);
}

TEST_CASE("a non-finite objective stops the step before any update and names every loss term") {
  const Graph g = regression();
  ParamStore<float> params(g);
  params.initialize(g, 3);
  const std::vector<float> before(params.values().begin(), params.values().end());
  const auto sgd = make_optimizer("sgd", params);
  Step step(params, *sgd);
  bool hooked = false;
  step.add_transform(std::make_unique<SeeGradients>([&](ParamStore<float>&) { hooked = true; }));
  Tape<float> tape(g, params, {.batch = 4});
  const StepResult r = step.run({.step = 0, .learning_rate = 0.1}, tape, [](Tape<float>& t, size_t i) {
    feed_regression(t, i);
    t.input("x")[5] = std::nanf("");
  });
  CHECK_FALSE(r.finite);
  CHECK(r.problem.find("the objective is nan") != std::string::npos);
  CHECK(r.problem.find("loss = nan") != std::string::npos);
  CHECK(r.problem.find("the first non-finite value is at 'x' (input)") != std::string::npos);
  CHECK_FALSE(hooked);
  CHECK(std::equal(before.begin(), before.end(), params.values().begin()));
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
  const auto sgd = make_optimizer("sgd", params);
  Step step(params, *sgd, model_constraints(g, params, MaxNormRule::UnitIncoming), /*seed=*/3);
  Tape<float> tape(g, params, {.batch = 50});

  const Graph eval_graph = build_mlp({.layers = {16, 64, 64, 4}});  // same parameters, no dropout
  Tape<float> eval(eval_graph, params, {.batch = test.size});
  auto test_error = [&] {
    copy_batch(test, 0, eval.input("x"), eval.input("y"));
    eval.forward();
    return error_rate(test, eval.value("logits"));
  };

  const double error_before = test_error();
  std::vector<double> epoch_loss;
  int64_t n = 0;
  for (int epoch = 0; epoch < 15; ++epoch) {
    double total = 0;
    for (int64_t first = 0; first < train.size; first += 50, ++n) {
      const StepResult r = step.run({.step = n, .learning_rate = 0.1, .momentum = 0.9}, tape, [&](Tape<float>& t, size_t) {
        copy_batch(train, first, t.input("x"), t.input("y"));
      });
      REQUIRE(r.finite);
      total += r.objective;
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

}  // namespace test_step
