// N-ary trees: a cell with k child ports takes nodes of 1 to k children, child j in port j
// and zeros in the ports past a node's last child. The unrolled graph computes that
// formula node by node, its gradient (fuzz keyed) matches finite differences, a TreeTape
// runs such trees as their graphs do, and model files name the child ports as a list
// (files of binary cells that say "left" and "right" still read).
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <cmath>
#include <string>

#include "pens/autodiff/gradcheck.h"
#include "pens/autodiff/tape.h"
#include "pens/graph/noise.h"
#include "pens/graph/tree.h"
#include "pens/models/sst.h"
#include "pens/serialization/model_file.h"
#include "pens/train/tasks/tree_model.h"
#include "tests/support/eval.h"
#include "pens/serialization/files.h"
#include "tests/support/helpers.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"

namespace test_nary_tree {

using namespace pens;
using pens::testing::random_params;
using pens::testing::Values;

namespace {

constexpr int64_t kVocab = 6, kDim = 3, kArity = 3, kClasses = 5;
constexpr uint64_t kMaxText = uint64_t{1} << 24;

// tanh([c0; c1; c2] W + b) over three child ports, the word table E at the leaves, scores
// C v + c; with fuzz, one noisy child per tree carries the loss.
Model ternary_cell(double fuzz) {
  Model model;
  Graph& g = model.graph;
  const Attributes small{{"init", "normal"}, {"std", 0.3}};
  const NodeId E = g.param("E", Shape{kVocab, kDim}, small);
  const NodeId W = g.param("W", Shape{kArity * kDim, kDim}, small);
  const NodeId b = g.param("b", Shape{kDim}, small);
  const NodeId C = g.param("C", Shape{kDim, kClasses}, small);
  const NodeId c = g.param("c", Shape{kClasses}, small);
  g.add("embedding", {E, g.input("words", Shape{kBatch}, DType::Index)}, {}, "leaf");
  TreePorts ports;
  ports.children = {"first", "second", "third"};
  std::vector<NodeId> children;
  for (const std::string& name : ports.children) children.push_back(g.input(name, Shape{kBatch, kDim}));
  const NodeId joined = g.add("concat", children, {{"axis", int64_t{1}}}, "joined");
  g.add("tanh", {g.add("affine", {joined, W, b}, {}, "pre")}, {}, "compose");
  g.set_flag(g.add("affine", {g.input("node", Shape{kBatch, kDim}), C, c}, {}, "scores"), kOutput);
  model.tree = ports;
  if (fuzz > 0) {
    for (NodeId p : {E, W, C}) add_noise(g, p, "fuzz", {{"sigma", fuzz}});
    PseudoEnsembleSpec one_child;
    one_child.children = 1;
    one_child.loss_on = "child";
    model.ensemble = one_child;
  }
  return model;
}

// Leaves a (0), b (1), a unary node over b (2), leaves c d e (3-5), a ternary node over
// them (6), and the root over a, the unary and the ternary node (7).
SentimentTree mixed_tree() {
  SentimentTree t = parse_trees("(3 (1 a) (2 (0 b)) (4 (2 c) (3 d) (1 e)))", "test", kArity)[0];
  t.word_id = {1, 2, -1, 3, 4, 5, -1, -1};
  return t;
}

Values feed_values(const UnrolledTree& u, const SentimentTree& t) {
  Values v;
  for (int32_t leaf : u.leaves) v[u.words].push_back(t.word_id[static_cast<size_t>(leaf)]);
  for (int32_t node : u.labeled) v[u.labels].push_back(t.label[static_cast<size_t>(node)]);
  for (const auto& [name, rows] : u.indices) v[name] = std::vector<double>(rows.begin(), rows.end());
  return v;
}

}  // namespace

TEST_CASE("an N-ary cell reads child j in port j and zeros where a node has fewer children") {
  const Model model = ternary_cell(0);
  const SentimentTree tree = mixed_tree();
  REQUIRE(tree.shape.arity() == 3);
  CHECK(tree.shape.children(2).size() == 1);
  const TreeModel tm(model, SentimentTask::Fine);
  const UnrolledTree u = tm.unroll(tree);
  // Two levels above the leaves, three child ports each.
  CHECK(u.indices.size() == 6);
  Values values = random_params(model.graph, 3);
  const Values feed = feed_values(u, tree);
  values.insert(feed.begin(), feed.end());
  const std::vector<double> scores = testing::evaluate(u.graph, values, u.scores);
  const auto at = [&](const char* name, int64_t i) { return values.at(name)[static_cast<size_t>(i)]; };
  std::vector<Eigen::VectorXd> v(static_cast<size_t>(tree.size()));
  for (int64_t i = 0; i < tree.size(); ++i) {
    Eigen::VectorXd out(kDim);
    const std::span<const int32_t> children = tree.shape.children(i);
    for (int64_t k = 0; k < kDim; ++k) {
      if (children.empty()) {
        out[k] = at("E", tree.word_id[static_cast<size_t>(i)] * kDim + k);
        continue;
      }
      double s = at("b", k);
      for (size_t j = 0; j < children.size(); ++j) {  // absent children add nothing: zeros
        for (int64_t x = 0; x < kDim; ++x) {
          s += v[static_cast<size_t>(children[j])][x] * at("W", (static_cast<int64_t>(j) * kDim + x) * kDim + k);
        }
      }
      out[k] = std::tanh(s);
    }
    v[static_cast<size_t>(i)] = out;
  }
  for (int64_t i = 0; i < tree.size(); ++i) {
    for (int64_t c = 0; c < kClasses; ++c) {
      double expected = at("c", c);
      for (int64_t j = 0; j < kDim; ++j) expected += v[static_cast<size_t>(i)][j] * at("C", j * kClasses + c);
      CHECK(scores[static_cast<size_t>(u.row_of[static_cast<size_t>(i)] * kClasses + c)] ==
            doctest::Approx(expected).epsilon(1e-12));
    }
  }
}

TEST_CASE("an N-ary tree's objective gradient matches finite differences, the fuzz keyed") {
  const Model model = ternary_cell(0.05);
  const SentimentTree tree = mixed_tree();
  const TreeModel tm(model, SentimentTask::Fine, 0.5);
  REQUIRE(tm.perturbs_cell());
  const UnrolledTree u = tm.training_tree(tree);
  Values values = random_params(model.graph, 5);
  const Values feed = feed_values(u, tree);
  values.insert(feed.begin(), feed.end());
  GradcheckOptions options;
  options.inputs = false;
  options.key = {.seed = 3, .step = 1, .example = 2};
  const GradcheckResult r = gradcheck(u.graph, values, options);
  INFO(r.worst);
  CHECK(r.passed);
  CHECK(r.nonzero > 40);
}

TEST_CASE("a TreeTape runs N-ary trees as their unrolled graphs do") {
  const Model model = ternary_cell(0.05);
  const TreeModel tm(model, SentimentTask::Fine, 1.0);
  std::vector<SentimentTree> trees = parse_trees(
      "(3 (1 a) (2 (0 b)) (4 (2 c) (3 d) (1 e)))\n(1 (2 (0 b)))\n(2 (3 a) (4 c))\n(0 (1 e) (2 (3 d) (3 a) (2 b)))\n", "test",
      kArity);
  const Vocabulary vocabulary = Vocabulary::from_trees(trees, {});
  vocabulary.assign_ids(trees);
  ParamStore<float> params(model.graph);
  params.initialize(model.graph, 7);
  const std::unique_ptr<TreeTape> tape = tm.tree_tape(params);
  std::vector<int32_t> labels;
  for (size_t i = 0; i < trees.size(); ++i) {
    CAPTURE(i);
    const NoiseKey key{.seed = 4, .step = 2, .example = i + 1};
    params.zero_grad();
    const UnrolledTree u = tm.training_tree(trees[i]);
    Tape<float> graph_tape(u.graph, params);
    tm.feed(graph_tape, u, trees[i]);
    graph_tape.set_noise_key(key);
    graph_tape.forward();
    graph_tape.backward();
    const std::vector<float> expected(params.grads().begin(), params.grads().end());
    params.zero_grad();
    tm.set_tree_of(*tape, trees[i], labels);
    tape->set_noise_key(key);
    tape->forward();
    tape->backward();
    CHECK(tape->objective() == doctest::Approx(graph_tape.objective()).epsilon(1e-6));
    double worst = 0;
    for (size_t k = 0; k < expected.size(); ++k) worst = std::max(worst, std::abs(double(params.grads()[k]) - expected[k]));
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("model files name the child ports as a list; binary files of old name left and right") {
  const testing::TempDir dir;
  const Model model = ternary_cell(0);
  save_model(model, dir / "ternary.model.json");
  const Model back = load_model(dir / "ternary.model.json");
  REQUIRE(back.tree);
  CHECK(back.tree->children == std::vector<std::string>{"first", "second", "third"});
  std::string text = read_file(dir / "ternary.model.json", kMaxText);
  const std::string list = R"("children": ["first", "second", "third"])";
  REQUIRE(text.find(list) != std::string::npos);
  // A cell whose ports do not match the list is refused by name.
  std::string wrong = text;
  wrong.replace(wrong.find(list), list.size(), R"("children": ["first", "second"])");
  write_file_atomically(dir / "wrong.model.json", wrong);
  CHECK_ERROR_MENTIONS(load_model(dir / "wrong.model.json"), "'compose' reads input 'third'");
  // Both forms at once are refused; "left" and "right" alone name two child ports.
  std::string both = text;
  both.replace(both.find(list), list.size(), std::string(list) + R"(, "left": "first", "right": "second")");
  write_file_atomically(dir / "both.model.json", both);
  CHECK_ERROR_MENTIONS(load_model(dir / "both.model.json"), "name the child ports once");
  const std::string example = testing::source_dir() + "/examples/sst/ctn-fine.model.json";
  const Model binary = load_model(example);
  CHECK(binary.tree->children == std::vector<std::string>{"left", "right"});
  std::string old = read_file(example, kMaxText);
  const std::string pair = R"("children": ["left", "right"],)";
  REQUIRE(old.find(pair) != std::string::npos);
  old.replace(old.find(pair), pair.size(), R"("left": "left", "right": "right",)");
  write_file_atomically(dir / "old.model.json", old);
  CHECK(load_model(dir / "old.model.json").tree == binary.tree);
}

}  // namespace test_nary_tree
