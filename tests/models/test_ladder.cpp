// The ladder network built as a pseudo-ensemble (models/ladder.h): its decoder, its
// combinator, its denoising costs and its gradient.
#include <doctest/doctest.h>

#include <cmath>

#include "pens/autodiff/gradcheck.h"
#include "pens/autodiff/tape.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/ladder.h"
#include "tests/support/helpers.h"

namespace test_ladder {

using namespace pens;

namespace {

LadderSpec small_ladder() { return {.layers = {6, 5, 4, 3}, .noise = 0.3, .denoising = {2, 1, 0.5, 0.25}}; }

void fill_input(Tape<double>& tape) {
  auto x = tape.input("x");
  for (int64_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.37 * static_cast<double>(i));
  auto y = tape.input("y");
  for (int64_t i = 0; i < y.size(); ++i) y[i] = static_cast<double>(i % 3);
}

// The forward pass on fill_input's rows with noise key {3, 4}.
void run_forward(Tape<double>& tape) {
  fill_input(tape);
  tape.set_noise_key({3, 4});
  tape.forward();
}

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

}  // namespace

TEST_CASE("ladder: one child computes the decoder; inference is the clean encoder alone") {
  const Model model = build_ladder(small_ladder());
  REQUIRE(model.ensemble);
  CHECK(model.ensemble->penalties.size() == 4);  // one denoising cost per layer, input included
  const PseudoEnsemble pe = build_pseudo_ensemble(model.graph, *model.ensemble);
  for (const char* node : {"c1/xhat", "c1/zhat1/bn", "c1/zhat3/bn", "c1/u3", "c1/z2~gaussian", "c1/x~gaussian"}) {
    CHECK_MESSAGE(pe.graph.find(node).has_value(), node);
  }
  CHECK_FALSE(pe.graph.find("xhat").has_value());  // no clean decoder
  std::vector<std::string> targets;
  for (const PenaltyHandle& h : pe.penalties) targets.push_back(h.parent);
  CHECK(targets == std::vector<std::string>{"z3", "z2", "z1", "x"});
  const Graph inference = build_inference(model.graph);
  for (const char* node : {"xhat", "u0", "g0/mu", "V1", "zhat1"}) CHECK_FALSE(inference.find(node).has_value());
  CHECK(inference.find("logits").has_value());
}

TEST_CASE("ladder: the combinator is (z~ - mu(u)) v(u) + mu(u), and starts at zero") {
  const Model model = build_ladder(small_ladder());
  const PseudoEnsemble pe = build_pseudo_ensemble(model.graph, *model.ensemble);
  ParamStore<double> params(pe.graph);
  params.initialize(pe.graph, 5);
  {
    // As initialised every estimate is 0, so the input's cost is λ0 / 6 times the mean
    // over rows of |x|^2.
    Tape<double> tape(pe.graph, params, {.batch = 4});
    run_forward(tape);
    const auto x = tape.value("x");
    CHECK(tape.value("c1/xhat").arr().abs().maxCoeff() == 0);
    CHECK(tape.value("pen/xhat/l2")[0] == doctest::Approx(2.0 / 6 * x.arr().square().sum() / 4).epsilon(1e-12));
  }
  // With every a drawn at random, the estimate follows the formula unit by unit.
  std::vector<std::vector<double>> a(11);
  for (int i = 1; i <= 10; ++i) {
    auto values = params.value(cat("g0/a", i));
    for (int64_t j = 0; j < values.size(); ++j) values[j] = std::sin(1.3 * i + 0.7 * static_cast<double>(j));
    a[i].assign(values.data, values.data + values.size());
  }
  Tape<double> tape(pe.graph, params, {.batch = 4});
  run_forward(tape);
  const auto noisy = tape.value("c1/x~gaussian"), u = tape.value("c1/u0"), xhat = tape.value("c1/xhat");
  REQUIRE(xhat.size() == 24);
  for (int64_t i = 0; i < 24; ++i) {
    const size_t j = static_cast<size_t>(i % 6);
    const double mu = a[1][j] * sigmoid(a[2][j] * u[i] + a[3][j]) + a[4][j] * u[i] + a[5][j];
    const double v = a[6][j] * sigmoid(a[7][j] * u[i] + a[8][j]) + a[9][j] * u[i] + a[10][j];
    CHECK(xhat[i] == doctest::Approx((noisy[i] - mu) * v + mu).epsilon(1e-12));
  }
}

TEST_CASE("ladder: the training objective's gradient, noise included, against finite differences") {
  const Model model = build_ladder(small_ladder());
  const PseudoEnsemble pe = build_pseudo_ensemble(model.graph, *model.ensemble);
  GradcheckOptions options;
  options.batch = 6;
  const GradcheckResult r = gradcheck(pe.graph, {{"y", {0, 1, 2, 0, 1, 2}}}, options);
  INFO(r.worst);
  CHECK(r.passed);
  CHECK(r.variables > 200);
}

TEST_CASE("ladder: the estimates are normalised with the clean encoder's batch statistics, or the child's own") {
  for (const bool clean : {true, false}) {
    CAPTURE(clean);
    LadderSpec spec = small_ladder();
    spec.clean_estimate_statistics = clean;
    const Model model = build_ladder(spec);
    const PseudoEnsemble pe = build_pseudo_ensemble(model.graph, *model.ensemble);
    const NodeId bn = pe.graph.at("c1/zhat2/bn");
    REQUIRE(pe.graph.inputs(bn).size() >= 3);
    CHECK(pe.graph[pe.graph.inputs(bn)[1]].name == (clean ? "z2/mean/clean" : "c1/z2/mean"));
    CHECK(pe.graph[pe.graph.inputs(bn)[2]].name == (clean ? "z2/var/clean" : "c1/z2/var"));

    ParamStore<double> params(pe.graph);
    params.initialize(pe.graph, 5);
    Tape<double> tape(pe.graph, params, {.batch = 4});
    run_forward(tape);
    // ẑ_BN = (ẑ - mean) / sqrt(var + eps), unit by unit, with the statistics chosen.
    const std::string prefix = clean ? "" : "c1/";
    const auto mean = tape.value(prefix + "z2/mean"), var = tape.value(prefix + "z2/var");
    const auto zhat = tape.value("c1/zhat2"), normalised = tape.value("c1/zhat2/bn");
    REQUIRE(normalised.size() == 16);
    for (int64_t i = 0; i < 16; ++i) {
      const int64_t j = i % 4;
      CHECK(normalised[i] == doctest::Approx((zhat[i] - mean[j]) / std::sqrt(var[j] + 1e-5)).epsilon(1e-9));
    }
    GradcheckOptions options;
    options.batch = 6;
    const GradcheckResult r = gradcheck(pe.graph, {{"y", {0, 1, 2, 0, 1, 2}}}, options);
    INFO(r.worst);
    CHECK(r.passed);
  }
}

TEST_CASE("ladder: the input's noise can differ from the layers', as the ladder paper's code sets them") {
  const auto sigma = [](const Model& m, const char* node) {
    const auto& noise = m.graph.node(*m.graph.find(node)).noise;
    REQUIRE(noise.size() == 1);
    return noise[0].params.get_float("sigma");
  };
  const Model same = build_ladder(small_ladder());
  CHECK(sigma(same, "x") == 0.3);
  CHECK(sigma(same, "z1") == 0.3);
  LadderSpec spec = small_ladder();
  spec.noise = 0.2;
  spec.input_noise = 0.3;
  const Model apart = build_ladder(spec);
  CHECK(sigma(apart, "x") == 0.3);
  for (const char* z : {"z1", "z2", "z3"}) CHECK(sigma(apart, z) == 0.2);
  spec.input_noise = 0.0;  // a clean input, noisy layers
  const Model clean_input = build_ladder(spec);
  CHECK(clean_input.graph.node(*clean_input.graph.find("x")).noise.empty());
}

TEST_CASE("ladder: bad specs name what is wrong") {
  CHECK_ERROR_MENTIONS(build_ladder({.layers = {6, 5, 3}, .denoising = {1, 1}}), "one denoising weight per layer",
                       "3 widths, 2 weights");
  CHECK_ERROR_MENTIONS(build_ladder({.layers = {6, 0, 3}, .denoising = {1, 1, 1}}), "widths must be positive");
  CHECK_ERROR_MENTIONS(build_ladder({.layers = {6, 5, 3}, .input_noise = -0.1, .denoising = {1, 1, 1}}),
                       "input noise must be >= 0", "-0.1");
}

}  // namespace test_ladder
