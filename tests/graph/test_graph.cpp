#include <doctest/doctest.h>

#include <sstream>

#include "pens/graph/graph.h"
#include "pens/graph/infer.h"
#include "pens/graph/pass.h"
#include "pens/graph/printers.h"
#include "pens/models/mlp.h"
#include "pens/ops/registry.h"
#include "tests/support/helpers.h"

namespace test_graph {

using namespace pens;

namespace {
// x[B,4] -> affine(W[4,3], b[3]) -> relu -> sum -> loss
Graph small_net() {
  Graph g;
  const NodeId x = g.input("x", {kBatch, 4});
  const NodeId w = g.param("W", {4, 3});
  const NodeId b = g.param("b", {3});
  const NodeId a = g.add("affine", {x, w, b}, {}, "a");
  const NodeId h = g.add("relu", {a}, {}, "h");
  const NodeId loss = g.add("sum", {h}, {}, "loss");
  g.set_flag(loss, kLoss);
  return g;
}
}  // namespace

TEST_CASE("graph: nodes, ordered inputs, consumers, names") {
  Graph g;
  const NodeId a = g.input("a", {2, 3});
  const NodeId b = g.input("b", {2, 3});
  const NodeId d = g.add("sub", {b, a}, {}, "d");
  const NodeId sq = g.add("mul", {d, d});
  CHECK(g.inputs(d) == std::vector<NodeId>{b, a});  // slot order, not insertion order
  CHECK(g.inputs(sq) == std::vector<NodeId>{d, d});
  CHECK(g.consumers(d) == std::vector<NodeId>{sq});  // listed once though read twice
  CHECK(g[sq].name == "mul_0");                      // generated name
  CHECK(g.at("d") == d);
  CHECK_FALSE(g.find("nope").has_value());
  CHECK_ERROR_MENTIONS(g.at("nope"), "no node named 'nope'");
  CHECK_ERROR_MENTIONS(g.add("relu", {a}, {}, "d"), "duplicate node name 'd'");
  CHECK_ERROR_MENTIONS(g.add("relux", {a}, {}, "r"), "unknown op 'relux'");
  CHECK(is_input(g[a]));
  CHECK_FALSE(is_param(g[a]));
}

TEST_CASE("graph: every op rejects a wrong number of inputs, naming the node") {
  for (const OpDef* op : OpRegistry::global().all()) {
    INFO("op " << op->name);
    Graph g;
    std::vector<NodeId> too_many;
    for (size_t i = 0; i <= op->inputs.size(); ++i) too_many.push_back(g.input("i" + std::to_string(i), {2, 2}));
    if (!op->variadic) {
      CHECK_ERROR_MENTIONS(g.add(op->name, too_many, {}, "victim"), "node 'victim'", op->name.c_str(),
                           "expected");
    }
    if (!op->inputs.empty()) {
      const std::vector<NodeId> too_few(too_many.begin(), too_many.begin() + static_cast<long>(op->inputs.size()) - 1);
      CHECK_ERROR_MENTIONS(g.add(op->name, too_few, {}, "victim"), "node 'victim'", "expected");
    }
  }
}

TEST_CASE("graph: topological order keeps insertion order when it is valid, and finds cycles") {
  Graph g = small_net();
  std::vector<std::string> names;
  for (NodeId v : g.topological_order()) names.push_back(g[v].name);
  CHECK(names == std::vector<std::string>{"x", "W", "b", "a", "h", "loss"});

  // Rewire so that the order is no longer the insertion order: still topological.
  Graph h;
  const NodeId late = h.add("relu", {h.input("tmp", {2})}, {}, "late");
  const NodeId early = h.input("early", {2});
  h.set_inputs(late, {early});
  const auto order = h.topological_order();
  CHECK(std::find(order.begin(), order.end(), early) < std::find(order.begin(), order.end(), late));

  // A cycle: a -> b -> a.
  Graph c;
  const NodeId x = c.input("x", {2});
  const NodeId a = c.add("relu", {x}, {}, "a");
  const NodeId b = c.add("tanh", {a}, {}, "b");
  c.set_inputs(a, {b});
  CHECK_ERROR_MENTIONS(c.topological_order(), "cycle", "node '");
  CHECK_ERROR_MENTIONS(verify(c), "cycle");
}

TEST_CASE("verify: shapes and types are checked, errors name the node") {
  SUBCASE("shape inference binds the batch") {
    const auto values = infer_values(small_net(), 7);
    const Graph g = small_net();
    CHECK(values[g.at("a")].shape == Shape{7, 3});
    CHECK(values[g.at("loss")].shape == Shape{});
  }
  SUBCASE("mismatched affine") {
    Graph g;
    const NodeId x = g.input("x", {kBatch, 5});
    g.add("affine", {x, g.param("W", {4, 3}), g.param("b", {3})}, {}, "layer1");
    // The batch verify() binds is a placeholder: its dimension reads B, a real 2 stays.
    CHECK_ERROR_MENTIONS(verify(g), "node 'layer1'", "affine", "x is [B,5] but W is [4,3]");
    CHECK_ERROR_MENTIONS(verify(g, 7), "x is [7,5] but W is [4,3]");  // a batch the caller chose
    Graph two;
    const NodeId x2 = two.input("x", {kBatch, 2});
    two.add("affine", {x2, two.param("W", {3, 2}), two.param("b", {2})}, {}, "layer1");
    CHECK_ERROR_MENTIONS(verify(two), "x is [B,2] but W is [3,2]");
  }
  SUBCASE("non-broadcastable add") {
    Graph g;
    g.add("add", {g.input("p", {3, 4}), g.input("q", {3, 5})}, {}, "sum34");
    CHECK_ERROR_MENTIONS(verify(g), "node 'sum34'", "do not broadcast");
  }
  SUBCASE("real labels where an index is expected") {
    Graph g;
    g.add("softmax_xent", {g.input("s", {kBatch, 10}), g.input("y", {kBatch})}, {}, "xent");
    CHECK_ERROR_MENTIONS(verify(g), "node 'xent'", "labels", "should be index", "got real");
  }
  SUBCASE("a loss must be a scalar") {
    Graph g;
    const NodeId r = g.add("relu", {g.input("x", {kBatch, 3})}, {}, "r");
    g.set_flag(r, kLoss);
    CHECK_ERROR_MENTIONS(verify(g), "node 'r'", "loss", "not a real scalar");
  }
  SUBCASE("parameters have no batch dimension") {
    Graph g;
    g.param("W", {kBatch, 3});
    CHECK_ERROR_MENTIONS(verify(g), "node 'W'", "batch");
  }
  SUBCASE("an unknown initializer") {
    Graph g;
    g.param("W", {2, 3}, {{"init", std::string("xavier")}});
    CHECK_ERROR_MENTIONS(verify(g), "node 'W'", "unknown init 'xavier'");
  }
  SUBCASE("an initializer without its argument") {
    Graph g;
    g.param("W", {2, 3}, {{"init", std::string("normal")}});
    CHECK_ERROR_MENTIONS(verify(g), "node 'W'", "needs the attribute 'std'");
  }
  SUBCASE("a diagonal on a matrix that is not square") {
    Graph g;
    g.param("W", {2, 3}, {{"init", std::string("zeros")}, {"diagonal", 1.0}});
    CHECK_ERROR_MENTIONS(verify(g), "node 'W'", "diagonal: a square matrix has a main diagonal, the shape is [2,3]");
  }
}

TEST_CASE("graphs are values: a copy can change without touching the original") {
  const Graph original = small_net();
  Graph copy = original;
  copy.add("tanh", {copy.at("h")}, {}, "extra");
  copy.node(copy.at("h")).layer = "changed";
  CHECK(original.size() == 6);
  CHECK(copy.size() == 7);
  CHECK(original["h"].layer.empty());
}

TEST_CASE("printers: the text form lists every node with its shape, DOT is well formed") {
  Graph g = small_net();
  g.node(g.at("h")).noise.push_back({"mask", {{"p", 0.5}}});
  g.node(g.at("h")).layer = "h1";
  const std::string text = to_text(g, 5);
  CHECK(text.find("graph: 6 nodes, batch 5") != std::string::npos);
  CHECK(text.find("%a    = affine(%x, %W, %b)  [5,3]") != std::string::npos);
  CHECK(text.find("layer=h1") != std::string::npos);
  CHECK(text.find("noise=mask(p=0.5)") != std::string::npos);
  CHECK(text.find("loss") != std::string::npos);

  std::ostringstream dot;
  write_dot(dot, g, 5);
  const std::string d = dot.str();
  CHECK(d.rfind("digraph", 0) == 0);
  CHECK(d.find("affine [5,3]") != std::string::npos);
  CHECK(d.find("noise: mask(p=0.5)") != std::string::npos);
  CHECK(std::count(d.begin(), d.end(), '{') == std::count(d.begin(), d.end(), '}'));
  // Five edges: x, W, b into a; a into h; h into loss.
  size_t edges = 0;
  for (size_t at = d.find("->"); at != std::string::npos; at = d.find("->", at + 2)) ++edges;
  CHECK(edges == 5);

  // A graph that fails inference still prints, and says why.
  Graph bad;
  bad.add("matmul", {bad.input("p", {2, 3}), bad.input("q", {4, 5})}, {}, "mm");
  CHECK(to_text(bad).find("shape inference failed") != std::string::npos);
}

TEST_CASE("PruneDeadNodes removes what no output depends on and leaves its input alone") {
  Graph g = small_net();
  g.add("tanh", {g.at("a")}, {}, "unused");
  g.param("orphan", {3});
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(std::make_unique<PruneDeadNodes>());
  const Graph pruned = run_passes(g, passes);
  CHECK(g.size() == 8);
  CHECK(pruned.size() == 6);
  CHECK_FALSE(pruned.find("unused").has_value());
  CHECK_FALSE(pruned.find("orphan").has_value());
  // Edges and their slots survive the copy.
  CHECK(pruned.inputs(pruned.at("a")) ==
        std::vector<NodeId>{pruned.at("x"), pruned.at("W"), pruned.at("b")});
  CHECK(pruned["loss"].has(kLoss));
}

TEST_CASE("run_passes names the pass whose output fails verification") {
  struct Breaker : Pass {
    std::string_view name() const override { return "breaker"; }
    Graph run(const Graph& in) const override {
      Graph out = in;
      out.node(out.at("loss")).flags = 0;
      out.set_flag(out.at("h"), kLoss);  // not a scalar
      return out;
    }
  };
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(std::make_unique<Breaker>());
  CHECK_ERROR_MENTIONS(run_passes(small_net(), passes), "pass breaker", "node 'h'");
}

TEST_CASE("the paper's MLP has the expected structure") {
  const Graph g = build_mlp({.layers = {784, 800, 800, 10}, .input_dropout = 0.2, .hidden_dropout = 0.5});
  const auto values = verify(g, 100);
  CHECK(values[g.at("logits")].shape == Shape{100, 10});
  CHECK(values[g.at("h2")].shape == Shape{100, 800});
  CHECK(g["drop1"].attrs.get_float("p") == 0.2);
  CHECK(g["drop3"].attrs.get_float("p") == 0.5);
  CHECK(g["logits"].layer == "out");
  CHECK(g["W1"].attrs.get_float("std") == 0.01);
  CHECK(g["b1"].attrs.get_float("value") == 0.1);
  CHECK(g["b3"].attrs.get_float("value") == 0.0);
  int64_t params = 0;
  for (NodeId v : g.nodes()) {
    if (is_param(g[v])) params += values[v].shape.numel();
  }
  CHECK(params == 784 * 800 + 800 + 800 * 800 + 800 + 800 * 10 + 10);
}

}  // namespace test_graph
