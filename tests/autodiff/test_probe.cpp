// Probe nodes: a perturbation found from gradients inside the forward pass (adversarial
// noise, VAT), computed by its body on a tape of its own.
#include <doctest/doctest.h>

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>

#include "pens/autodiff/tape.h"
#include "pens/graph/noise.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/mlp.h"
#include "tests/support/alloc_counter.h"

namespace test_probe {

using namespace pens;

namespace {

constexpr int64_t kRows = 5, kWidth = 4;
constexpr double kEps = 0.5;

// A 4-6-3 network whose child sees adversarial noise on its input; V = KL(parent || child)
// with the parent as a fixed target, as VAT has it.
PseudoEnsemble vat_ensemble(int64_t iterations, double xi = 1e-4, const std::string& precision = "float32") {
  Graph parent = build_mlp({.layers = {kWidth, 6, 3}, .weight_std = 0.9, .output_bias = 0.2});
  add_noise(parent, parent.at("x"), "adversarial",
            {{"eps", kEps}, {"xi", xi}, {"iterations", iterations}, {"precision", precision}});
  PseudoEnsembleSpec spec;
  spec.children = 1;
  spec.pairing = "parent-child";
  spec.penalties = {{"logits", "kl", 1.0, "all", true}};
  return build_pseudo_ensemble(parent, spec);
}

void fill_x(TensorView<double> x, int64_t first_row = 0) {
  for (int64_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7 * static_cast<double>(i + first_row * kWidth) + 0.3);
}

std::vector<double> row(const TensorView<const double>& t, int64_t i) {
  return {t.data + i * kWidth, t.data + (i + 1) * kWidth};
}

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

}  // namespace

TEST_CASE("adversarial noise: a probe node with a body; the body is the parent's output against the child's") {
  const PseudoEnsemble e = vat_ensemble(1);
  const Graph& g = e.graph;
  const NodeId probe = g.at("c1/x~r_adv");
  CHECK(g[probe].op->name == "probe");
  CHECK(g[g.at("c1/x~adversarial")].op->name == "add");
  const ProbeBody* body = g.probe("c1/x~r_adv");
  REQUIRE(body);
  REQUIRE(body->graph);
  const Graph& b = *body->graph;
  // The perturbation tried is an input of the probe's name; the objective is the
  // divergence's sum over rows; the parameters are the parent's.
  CHECK(is_input(b["c1/x~r_adv"]));
  CHECK(b.nodes_with(kLoss).size() == 1);
  CHECK(b.find("logits"));
  CHECK(b.find("c1/logits"));
  CHECK(b.find("W1"));
  // Monte-Carlo inference does not sample noise found from gradients.
  Graph parent = build_mlp({.layers = {kWidth, 6, 3}});
  add_noise(parent, parent.at("x"), "adversarial");
  const Graph mc = build_inference(parent, 2);
  for (NodeId v : mc.nodes()) CHECK(mc[v].op->name != "probe");
  // A divergence that is not a penalty kind is named.
  Graph wrong = build_mlp({.layers = {kWidth, 6, 3}});
  add_noise(wrong, wrong.at("x"), "adversarial", {{"divergence", std::string("kll")}});
  PseudoEnsembleSpec spec;
  spec.children = 1;
  spec.pairing = "parent-child";
  CHECK_THROWS_WITH(build_pseudo_ensemble(wrong, spec), doctest::Contains("divergence: unknown penalty kind 'kll' (did you mean 'kl'? registered: "));
}

TEST_CASE("adversarial noise has length eps and points where the divergence grows fastest") {
  const PseudoEnsemble e = vat_ensemble(40);
  ParamStore<double> params(e.graph);
  params.initialize(e.graph, 5);
  Tape<double> tape(e.graph, params, {.batch = kRows});
  fill_x(tape.input("x"));
  auto y = tape.input("y");
  for (int64_t i = 0; i < kRows; ++i) y[i] = static_cast<double>(i % 3);
  const NoiseKey key{7, 3};
  tape.set_noise_key(key);
  tape.forward();
  const TensorView<const double> r = tape.value("c1/x~r_adv");
  // The outer objective holds the perturbation constant: no gradient reaches it.
  tape.backward();
  CHECK(tape.grad("c1/x~r_adv").data == nullptr);

  // D(r), the body's objective, evaluated by a tape of the body alone.
  const Graph& body = *e.graph.probe("c1/x~r_adv")->graph;
  Tape<double> d_tape(body, params, {.batch = kRows});
  fill_x(d_tape.input("x"));
  d_tape.set_noise_key(key);
  const auto divergence = [&](int64_t i, const Eigen::Vector4d& ri) {
    auto in = d_tape.input("c1/x~r_adv");
    in.arr().setZero();
    for (int j = 0; j < kWidth; ++j) in[i * kWidth + j] = ri[j];
    d_tape.forward();
    return d_tape.objective();
  };
  for (int64_t i = 0; i < kRows; ++i) {
    CAPTURE(i);
    const std::vector<double> ri = row(r, i);
    CHECK(norm(ri) == doctest::Approx(kEps).epsilon(1e-12));
    // The Hessian of D at r = 0 by central differences of D's values (rows are
    // independent): its leading eigenvector is the direction of fastest growth. A step
    // small enough to stay between the ReLUs' kinks.
    const double h = 1e-5;
    Eigen::Matrix4d hessian;
    for (int j = 0; j < kWidth; ++j) {
      for (int k = 0; k < kWidth; ++k) {
        const Eigen::Vector4d ej = Eigen::Vector4d::Unit(j) * h, ek = Eigen::Vector4d::Unit(k) * h;
        hessian(j, k) = (divergence(i, ej + ek) - divergence(i, ej - ek) - divergence(i, ek - ej) +
                         divergence(i, -ej - ek)) /
                        (4 * h * h);
      }
    }
    Eigen::SelfAdjointEigenSolver<Eigen::Matrix4d> solver(hessian);
    const Eigen::Vector4d leading = solver.eigenvectors().col(3);
    const Eigen::Vector4d found = Eigen::Map<const Eigen::Vector4d>(ri.data());
    CHECK(std::abs(found.dot(leading)) / found.norm() == doctest::Approx(1.0).epsilon(1e-6));
    // So, near 0, D grows faster along it than along any coordinate direction.
    const double small = 1e-3;
    for (int j = 0; j < kWidth; ++j) {
      CHECK(divergence(i, found * (small / kEps)) > divergence(i, Eigen::Vector4d::Unit(j) * small));
    }
  }
}

TEST_CASE("adversarial noise in float64: a step xi of 1e-6 on a float tape finds what double arithmetic finds") {
  // The direction found in double throughout with the same step and algorithm, from the
  // float tape's parameters and inputs (float values, widened). (Without the gradient at
  // r = 0 subtracted even a double tape is off by up to 3e-4 in cosine at this step: its
  // parent's and child's outputs at r = 0 differ in the last bits.)
  const PseudoEnsemble reference = vat_ensemble(100, 1e-6, "float64");
  ParamStore<float> narrow(reference.graph);
  narrow.initialize(reference.graph, 5);
  ParamStore<double> wide(reference.graph);
  for (const ParamEntry& e : narrow.entries()) {
    const TensorView<float> from = narrow.value(e);
    std::copy_n(from.data, from.size(), wide.value(e.name).data);
  }
  Tape<double> exact(reference.graph, wide, {.batch = kRows});
  // Inputs near 8, where float32's spacing (9.5e-7) is coarser than xi's steps.
  const auto inputs = [](auto x) {
    for (int64_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>(8 + 0.5 * std::sin(0.7 * static_cast<double>(i) + 0.3));
    }
  };
  inputs(exact.input("x"));
  const NoiseKey key{7, 3};
  exact.set_noise_key(key);
  exact.forward();
  const TensorView<const double> expected = exact.value("c1/x~r_adv");
  // The cosine between each row found on a float tape with xi = 1e-6 and the reference's.
  const auto cosines = [&](const std::string& precision) {
    const PseudoEnsemble e = vat_ensemble(100, 1e-6, precision);
    ParamStore<float> params(e.graph);
    params.initialize(e.graph, 5);
    Tape<float> tape(e.graph, params, {.batch = kRows});
    inputs(tape.input("x"));
    tape.set_noise_key(key);
    tape.forward();
    const TensorView<const float> r = tape.value("c1/x~r_adv");
    std::vector<double> out;
    for (int64_t i = 0; i < kRows; ++i) {
      double dot = 0, rr = 0, ee = 0;
      for (int64_t j = i * kWidth; j < (i + 1) * kWidth; ++j) {
        dot += r[j] * expected[j], rr += double(r[j]) * r[j], ee += expected[j] * expected[j];
      }
      out.push_back(std::abs(dot) / std::sqrt(rr * ee));
    }
    return out;
  };
  const std::vector<double> wide_body = cosines("float64"), narrow_body = cosines("float32");
  for (int64_t i = 0; i < kRows; ++i) {
    CAPTURE(i);
    CAPTURE(narrow_body[i]);
    CHECK(wide_body[i] == doctest::Approx(1.0).epsilon(1e-5));
  }
  // In float32 the step is mostly rounded away: no row has the direction (a row whose
  // step vanished altogether has none, and its cosine is NaN).
  CHECK(std::none_of(narrow_body.begin(), narrow_body.end(), [](double c) { return c >= 0.99; }));
  // A precision that is neither is named.
  Graph parent = build_mlp({.layers = {kWidth, 6, 3}});
  add_noise(parent, parent.at("x"), "adversarial", {{"precision", std::string("float16")}});
  PseudoEnsembleSpec spec;
  spec.children = 1;
  spec.pairing = "parent-child";
  CHECK_THROWS_WITH(build_pseudo_ensemble(parent, spec),
                    doctest::Contains("precision must be 'float32' or 'float64', got 'float16'"));
}

TEST_CASE("a forward pass through adversarial noise allocates nothing after its first, in either precision") {
  if (!testing::CountAllocations::available()) return;  // AddressSanitizer owns malloc
  for (const std::string precision : {"float32", "float64"}) {
    CAPTURE(precision);
    const PseudoEnsemble e = vat_ensemble(2, 1e-6, precision);
    ParamStore<float> params(e.graph);
    params.initialize(e.graph, 5);
    Tape<float> tape(e.graph, params, {.batch = kRows});
    tape.set_noise_key({7, 0});
    tape.forward();  // anything lazy settles
    tape.backward();
    int64_t allocations = 0;
    {
      testing::CountAllocations count;
      for (uint64_t step = 1; step <= 3; ++step) {
        tape.set_noise_key({7, step});
        tape.forward();
        tape.backward();
      }
      allocations = count.count();
    }
    CHECK(allocations == 0);
  }
}

TEST_CASE("adversarial noise is drawn per row of the global batch: a shard computes the whole batch's rows") {
  const PseudoEnsemble e = vat_ensemble(2);
  ParamStore<double> params(e.graph);
  params.initialize(e.graph, 5);
  const NoiseKey key{3, 11};
  const auto probe_rows = [&](int64_t batch, int64_t first_row, const std::vector<RowRun>& placement) {
    Tape<double> tape(e.graph, params, {.batch = batch});
    fill_x(tape.input("x"), first_row);
    tape.input("y").arr().setZero();
    tape.set_noise_key(key);
    if (!placement.empty()) tape.set_row_placement(placement);
    tape.forward();
    const auto r = tape.value("c1/x~r_adv");
    return std::vector<double>(r.data, r.data + r.size());
  };
  const std::vector<double> whole = probe_rows(6, 0, {});
  const std::vector<double> shard = probe_rows(3, 3, {{0, 3, 3}});
  REQUIRE(shard.size() == 3 * kWidth);
  for (size_t k = 0; k < shard.size(); ++k) CHECK(shard[k] == doctest::Approx(whole[3 * kWidth + k]).epsilon(1e-9));
  // The same key replays the same perturbation exactly.
  CHECK(probe_rows(6, 0, {}) == whole);
}

}  // namespace test_probe
