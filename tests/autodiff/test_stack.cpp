// Stacked products (CompileOptions::stack): nodes of a matrix-product op that share their
// weights run as one product over their stacked rows, in place. These tests compare every
// value and gradient with the tape that computes each node alone, and check which nodes
// stack and where their memory lies.
#include <doctest/doctest.h>

#include <cmath>

#include "pens/autodiff/tape.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/mlp.h"

namespace test_stack {

using namespace pens;

namespace {

using Names = std::vector<std::vector<std::string>>;

// A stacked and an unstacked tape of one graph, each on its own copy of the same
// parameters, run forward and backward on the same inputs and noise.
struct Pair {
  Graph g;
  ParamStore<double> stacked_params{g}, alone_params{g};
  Tape<double> stacked, alone;

  Pair(Graph graph, CompileOptions options)
      : g(std::move(graph)),
        stacked(g, init(stacked_params), with_stack(options, true)),
        alone(g, init(alone_params), with_stack(options, false)) {
    for (Tape<double>* t : {&stacked, &alone}) {
      for (NodeId v : g.nodes()) {
        if (!is_input(g[v])) continue;
        auto in = t->input(g[v].name);
        for (int64_t i = 0; i < in.size(); ++i) {
          in[i] = g[v].name == "y" ? static_cast<double>(i % 3) : std::sin(0.7 * static_cast<double>(i) + 0.1);
        }
      }
      t->set_noise_key({5, 11});
      t->forward();
      t->backward();
    }
  }
  ParamStore<double>& init(ParamStore<double>& p) {
    p.initialize(g, 3);
    return p;
  }
  static CompileOptions with_stack(CompileOptions o, bool stack) {
    o.stack = stack;
    return o;
  }

  // Every node's value and gradient, and every parameter's gradient, agree to round-off.
  void check_same() const {
    CHECK(stacked.objective() == doctest::Approx(alone.objective()).epsilon(1e-12));
    int64_t compared = 0;
    for (NodeId v : g.nodes()) {
      const std::string& name = g[v].name;
      CAPTURE(name);
      const auto a = stacked.value(name), b = alone.value(name);
      REQUIRE(a.size() == b.size());
      for (int64_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-12));
      const auto ga = stacked.grad(name), gb = alone.grad(name);
      REQUIRE(static_cast<bool>(ga) == static_cast<bool>(gb));
      for (int64_t i = 0; ga && i < ga.size(); ++i) {
        CHECK(ga[i] == doctest::Approx(gb[i]).epsilon(1e-10).scale(1.0));
        compared += ga[i] != 0.0;
      }
    }
    CHECK(compared > 0);  // the gradients compared are not all zero
  }
};

// Semi-supervised PEA on a small network: two children with Gaussian input noise and
// masks on h1, child 2 restricted to the unlabeled rows 4..8 of a batch of 9.
Graph semi_supervised_pea() {
  const Graph parent = build_mlp({.layers = {5, 7, 6, 3}, .weight_std = 0.5, .mask_hidden = 0.5, .gaussian_input = 0.1});
  PseudoEnsembleSpec spec;
  spec.children = 2;
  spec.loss_on = "child";
  spec.penalties = {{"h1", "direction", 1.0, "unlabeled"}, {"h2", "direction", 1.0, "unlabeled"},
                    {"logits", "tanh", 1.0, "unlabeled"}};
  return build_pseudo_ensemble(parent, spec, {.labeled_rows = 4}).graph;
}

}  // namespace

TEST_CASE("stacked products: each layer of two children runs as one product over their rows, in place") {
  Pair p(semi_supervised_pea(), {.batch = 9});
  CHECK(p.stacked.stacks() == Names{{"c1/a1", "c2/a1"}, {"c1/a2", "c2/a2"}, {"c1/logits", "c2/logits"}});
  CHECK(p.alone.stacks().empty());
  CHECK(stacked_products(p.g, {.batch = 9}) == p.stacked.stacks());  // what pens inspect lists
  // In place: child 2's rows follow child 1's, in the values, the first inputs and the
  // gradients of both, so the one product reads and writes each node's own memory.
  for (const auto& stack : p.stacked.stacks()) {
    const NodeId m1 = p.g.at(stack[0]), m2 = p.g.at(stack[1]);
    CAPTURE(stack[0]);
    CHECK(p.stacked.info(stack[0]).shape[0] == 9);
    CHECK(p.stacked.info(stack[1]).shape[0] == 5);  // the unlabeled rows alone (RestrictRows)
    for (const auto& [a, b] : {std::pair{m1, m2}, std::pair{p.g.inputs(m1)[0], p.g.inputs(m2)[0]}}) {
      const auto& first = p.g[a].name;
      const auto& second = p.g[b].name;
      CHECK(p.stacked.value(second).data == p.stacked.value(first).data + p.stacked.value(first).size());
      if (p.stacked.grad(first)) {
        CHECK(p.stacked.grad(second).data == p.stacked.grad(first).data + p.stacked.grad(first).size());
      }
    }
  }
  p.check_same();
}

TEST_CASE("stacked products: nodes that read each other's results, or differ in gradients, run alone") {
  // y1 = a·W and y2 = relu(y1)·W share W, but y2 needs y1: one product cannot make both.
  Graph chain;
  const NodeId w = chain.param("W", {4, 4}, {{"init", std::string("normal")}, {"std", 0.5}});
  const NodeId a = chain.input("a", {kBatch, 4});
  const NodeId y1 = chain.add("matmul", {a, w}, {}, "y1");
  const NodeId y2 = chain.add("matmul", {chain.add("relu", {y1}, {}, "r1"), w}, {}, "y2");
  chain.set_flag(chain.add("sum", {chain.add("square", {y2}, {}, "sq")}, {}, "loss"), kLoss);
  Pair recurrent(chain, {.batch = 3});
  CHECK(recurrent.stacked.stacks().empty());
  recurrent.check_same();

  // A1 = a·W, B1 = b·V, A2 = relu(B1)·W, B2 = relu(A1)·V: stacking {A1, A2} and {B1, B2}
  // would make each stack wait for the other. The first is formed, the second is not.
  Graph crossed;
  const NodeId W = crossed.param("W", {4, 4}, {{"init", std::string("normal")}, {"std", 0.5}});
  const NodeId V = crossed.param("V", {4, 4}, {{"init", std::string("normal")}, {"std", 0.5}});
  const NodeId in_a = crossed.input("a", {kBatch, 4});
  const NodeId in_b = crossed.input("b", {kBatch, 4});
  const NodeId A1 = crossed.add("matmul", {in_a, W}, {}, "A1");
  const NodeId B1 = crossed.add("matmul", {in_b, V}, {}, "B1");
  const NodeId A2 = crossed.add("matmul", {crossed.add("relu", {B1}, {}, "rB1"), W}, {}, "A2");
  const NodeId B2 = crossed.add("matmul", {crossed.add("relu", {A1}, {}, "rA1"), V}, {}, "B2");
  const NodeId both = crossed.add("concat", {A2, B2}, {}, "both");
  crossed.set_flag(crossed.add("sum", {crossed.add("square", {both}, {}, "sq")}, {}, "loss"), kLoss);
  // The inputs need gradients too, so that each stack's first inputs agree in needing them.
  Pair cross(crossed, {.batch = 3, .grad_inputs = true});
  CHECK(cross.stacked.stacks() == Names{{"A1", "A2"}});
  cross.check_same();

  // Two products of W on two inputs, one of which needs its gradient: a stack computes
  // its first inputs' gradients for all its rows or for none, so they run alone.
  Graph mixed;
  const NodeId wm = mixed.param("W", {4, 4}, {{"init", std::string("normal")}, {"std", 0.5}});
  const NodeId p1 = mixed.add("matmul", {mixed.input("a", {kBatch, 4}), wm}, {}, "p1");
  const NodeId p2 = mixed.add("matmul", {mixed.input("b", {kBatch, 4}), wm}, {}, "p2");
  mixed.set_flag(mixed.add("sum", {mixed.add("mul", {p1, p2}, {}, "prod")}, {}, "loss"), kLoss);
  Pair one_grad(mixed, {.batch = 3, .grad_inputs_named = {"a"}});
  CHECK(one_grad.stacked.stacks().empty());
  one_grad.check_same();
  Pair no_grads(mixed, {.batch = 3});
  CHECK(no_grads.stacked.stacks() == Names{{"p1", "p2"}});
  no_grads.check_same();
}

}  // namespace test_stack
