// The row-restricting pass: a child whose penalties read only the unlabeled rows is
// computed on those rows, with the values and gradients of the whole-batch graph.
#include <doctest/doctest.h>

#include <cmath>

#include "pens/autodiff/tape.h"
#include "pens/graph/infer.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/mlp.h"

namespace test_restrict_rows {

using namespace pens;

namespace {

// bench/modes.cpp's pea-ss at a small size: two children with Gaussian and mask noise,
// the loss on child 1's labeled rows, V^c and V^t over the unlabeled rows.
PseudoEnsembleSpec semi_supervised_spec() {
  PseudoEnsembleSpec spec;
  spec.children = 2;
  spec.loss_on = "child";
  spec.penalties = {{"h1", "direction", 1.0, "unlabeled"}, {"h2", "direction", 1.0, "unlabeled"},
                    {"logits", "tanh", 1.0, "unlabeled"}};
  return spec;
}

Graph semi_supervised_parent() {
  return build_mlp({.layers = {7, 6, 5, 3}, .weight_std = 0.5, .output_bias = 0.1, .mask_input = 0.2,
                    .mask_hidden = 0.5, .gaussian_input = 0.1, .gaussian_bias = 0.1});
}

struct Run {
  double objective = 0;
  std::vector<double> grads;
};

Run run(const Graph& g, int64_t batch, int64_t labeled) {
  ParamStore<double> params(g);
  params.initialize(g, 3);
  Tape<double> tape(g, params, {.batch = batch});
  tape.set_noise_key({5, 11});
  auto x = tape.input("x");
  for (int64_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * static_cast<double>(i));
  auto y = tape.input("y");
  for (int64_t i = 0; i < labeled; ++i) y[i] = static_cast<double>(i % 3);
  tape.forward();
  tape.backward();
  return {tape.objective(), {params.grads().begin(), params.grads().end()}};
}

}  // namespace

TEST_CASE("child 2 of a semi-supervised pseudo-ensemble runs on the unlabeled rows, with the same values") {
  const int64_t batch = 11, labeled = 4;  // rows 4..10 unlabeled: no alignment to noise blocks
  const Graph parent = semi_supervised_parent();
  const PseudoEnsemble restricted = build_pseudo_ensemble(parent, semi_supervised_spec(), {.labeled_rows = labeled});
  const PseudoEnsemble whole =
      build_pseudo_ensemble(parent, semi_supervised_spec(), {.labeled_rows = labeled, .restrict_rows = false});

  const std::vector<ValueInfo> values = infer_values(restricted.graph, batch);
  // Child 1 carries the loss on the labeled rows: all rows. Child 2 only the unlabeled.
  CHECK(values[restricted.graph.at("c1/h1")].shape[0] == batch);
  CHECK(values[restricted.graph.at("c2/h1")].shape[0] == batch - labeled);
  CHECK(values[restricted.graph.at("c2/logits")].shape[0] == batch - labeled);
  CHECK(restricted.graph["c2/h1~mask"].attrs.get_int("row_offset") == labeled);
  CHECK(infer_values(whole.graph, batch)[whole.graph.at("c2/h1")].shape[0] == batch);

  const Run a = run(restricted.graph, batch, labeled), b = run(whole.graph, batch, labeled);
  CHECK(a.objective == doctest::Approx(b.objective).epsilon(1e-12));
  REQUIRE(a.grads.size() == b.grads.size());
  double worst = 0;
  for (size_t i = 0; i < a.grads.size(); ++i) {
    worst = std::max(worst, std::abs(a.grads[i] - b.grads[i]) / (1e-12 + std::abs(b.grads[i])));
  }
  CHECK(worst < 1e-9);
}

TEST_CASE("a child whose loss or penalties read every row is left whole") {
  PseudoEnsembleSpec spec = semi_supervised_spec();
  for (PenaltyTerm& t : spec.penalties) t.rows = "all";
  const PseudoEnsemble built = build_pseudo_ensemble(semi_supervised_parent(), spec, {.labeled_rows = 4});
  const std::vector<ValueInfo> values = infer_values(built.graph, 11);
  CHECK(values[built.graph.at("c2/h1")].shape[0] == 11);
  CHECK(values[built.graph.at("c1/logits")].shape[0] == 11);
  for (NodeId v : built.graph.nodes()) CHECK(built.graph[v].name.find("[rows") == std::string::npos);
}

TEST_CASE("nested row ranges: a restricted node read by a narrower restricted one keeps both right") {
  // a = relu(x) is read on rows 2.. (a slice) and through b = tanh(a) on rows 5.. only.
  Graph g;
  const NodeId x = g.input("x", {kBatch, 3});
  const NodeId a = g.add("relu", {x}, {}, "a");
  const NodeId b = g.add("tanh", {a}, {}, "b");
  const NodeId wide = g.add("slice", {a}, {{"axis", int64_t{0}}, {"begin", int64_t{2}}}, "wide");
  const NodeId narrow = g.add("slice", {b}, {{"axis", int64_t{0}}, {"begin", int64_t{5}}}, "narrow");
  g.set_flag(g.add("sum", {wide}, {}, "sum_wide"), kLoss);
  g.set_flag(g.add("sum", {g.add("square", {narrow})}, {}, "sum_narrow"), kLoss);
  const Graph r = RestrictRows().run(g);
  const int64_t batch = 9;
  const std::vector<ValueInfo> values = infer_values(r, batch);
  CHECK(values[r.at("a")].shape[0] == batch - 2);
  CHECK(values[r.at("b")].shape[0] == batch - 5);

  const auto objective = [&](const Graph& graph) {
    ParamStore<double> params(graph);
    Tape<double> tape(graph, params, {.batch = batch, .grad_inputs = true});
    auto in = tape.input("x");
    for (int64_t i = 0; i < in.size(); ++i) in[i] = std::sin(0.7 * static_cast<double>(i)) + 0.2;
    tape.forward();
    tape.backward();
    const auto grad = tape.grad("x");
    return std::make_pair(tape.objective(), std::vector<double>(grad.data, grad.data + grad.size()));
  };
  const auto [restricted_value, restricted_grad] = objective(r);
  const auto [whole_value, whole_grad] = objective(g);
  CHECK(restricted_value == doctest::Approx(whole_value).epsilon(1e-12));
  REQUIRE(restricted_grad.size() == whole_grad.size());
  for (size_t i = 0; i < whole_grad.size(); ++i) CHECK(restricted_grad[i] == doctest::Approx(whole_grad[i]).epsilon(1e-12));
}

}  // namespace test_restrict_rows
