// Trees as graphs: the unrolled graph computes the paper's formula node by node, its
// gradient (with fuzzing, subspace sampling and activation noise keyed) matches finite
// differences, a sampled subspace computes what the full model computes with the dropped
// dimensions zeroed, and the lookup-first rewrite changes no value.
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "pens/autodiff/gradcheck.h"
#include "pens/autodiff/tape.h"
#include "pens/graph/pass.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/graph/tree.h"
#include "pens/models/ctn.h"
#include "pens/models/sst.h"
#include "pens/ops/gemm.h"
#include "pens/serialization/model_file.h"
#include "pens/train/tasks/tree_model.h"
#include "tests/support/eval.h"
#include "tests/support/helpers.h"

namespace test_tree {

using namespace pens;
using pens::testing::random_params;
using pens::testing::Values;

namespace {

constexpr int64_t kVocab = 6, kDim = 4;

// A tree with words 1..3 and every node labeled; its feed as gradcheck/evaluate values.
SentimentTree five_node_tree() {
  SentimentTree t = parse_trees("(3 (2 w) (4 (4 x) (1 y)))", "test")[0];
  t.word_id = {1, 4, 3, -1, -1};
  return t;
}

Values feed_values(const UnrolledTree& u, const SentimentTree& t, SentimentTask task, bool labels = true) {
  Values v;
  for (int32_t leaf : u.leaves) v[u.words].push_back(t.word_id[static_cast<size_t>(leaf)]);
  if (labels) {
    for (int32_t node : u.labeled) v[u.labels].push_back(task_label(task, t.label[static_cast<size_t>(node)]));
  }
  for (const auto& [name, rows] : u.indices) v[name] = std::vector<double>(rows.begin(), rows.end());
  if (labels && !u.label_rows.first.empty()) {
    v[u.label_rows.first] = std::vector<double>(u.label_rows.second.begin(), u.label_rows.second.end());
  }
  return v;
}

using Mat = Eigen::MatrixXd;
using Vec = Eigen::VectorXd;

// The formula, node by node: v = E[w] at leaves (tanh(E[w]) with leaf_tanh),
// tanh(v1ᵀ T_k v2 + Ml v1 + Mr v2 + m) inside.
std::vector<Vec> direct_vectors(const SentimentTree& t, const Values& p, bool leaf_tanh) {
  const auto at = [&](const char* name, int64_t i) { return p.at(name)[static_cast<size_t>(i)]; };
  std::vector<Vec> v(static_cast<size_t>(t.size()));
  for (int64_t i = 0; i < t.size(); ++i) {
    Vec out(kDim);
    if (t.is_leaf(i)) {
      for (int64_t j = 0; j < kDim; ++j) {
        const double e = at("E", t.word_id[static_cast<size_t>(i)] * kDim + j);
        out[j] = leaf_tanh ? std::tanh(e) : e;
      }
    } else {
      const Vec& a = v[static_cast<size_t>(t.shape.children(i)[0])];
      const Vec& b = v[static_cast<size_t>(t.shape.children(i)[1])];
      for (int64_t k = 0; k < kDim; ++k) {
        double s = at("m", k);
        for (int64_t x = 0; x < kDim; ++x) {
          // affine and matmul read [in, out] weights: (v·M)_k = Σ_x v_x M[x, k].
          s += a[x] * at("Ml", x * kDim + k) + b[x] * at("Mr", x * kDim + k);
          for (int64_t y = 0; y < kDim; ++y) s += a[x] * at("T", (k * kDim + x) * kDim + y) * b[y];
        }
        out[k] = std::tanh(s);
      }
    }
    v[static_cast<size_t>(i)] = out;
  }
  return v;
}

}  // namespace

TEST_CASE("a tree's graph computes the compact tensor network's formula at every node") {
  for (const bool leaf_tanh : {false, true}) {
    CAPTURE(leaf_tanh);
    const Model model = build_ctn({.vocabulary = kVocab, .dim = kDim, .classes = 5, .leaf_tanh = leaf_tanh});
    const SentimentTree tree = five_node_tree();
    const TreeModel tm(model, SentimentTask::Fine);
    const UnrolledTree u = tm.unroll(tree);
    Values values = random_params(model.graph, 3);
    const Values feed = feed_values(u, tree, SentimentTask::Fine);
    values.insert(feed.begin(), feed.end());
    const std::vector<double> scores = testing::evaluate(u.graph, values, u.scores);
    const std::vector<Vec> v = direct_vectors(tree, values, leaf_tanh);
    REQUIRE(scores.size() == static_cast<size_t>(5 * tree.size()));
    for (int64_t i = 0; i < tree.size(); ++i) {
      for (int64_t c = 0; c < 5; ++c) {
        double expected = values["c"][static_cast<size_t>(c)];
        for (int64_t j = 0; j < kDim; ++j) {
          expected += v[static_cast<size_t>(i)][j] * values["C"][static_cast<size_t>(j * 5 + c)];
        }
        const double got = scores[static_cast<size_t>(u.row_of[static_cast<size_t>(i)] * 5 + c)];
        CHECK(got == doctest::Approx(expected).epsilon(1e-12));
      }
    }
    // Heights: three leaves, then (x y), then the root.
    CHECK(u.indices.size() == 4);
    CHECK(u.root_row() == 4);
  }
}

TEST_CASE("the whole tree objective's gradient matches finite differences, with every noise keyed") {
  for (const std::string task : {"fine", "binary"}) {
    for (const bool leaf_tanh : {false, true}) {
      CAPTURE(task);
      CAPTURE(leaf_tanh);
      const SentimentTask t = parse_sentiment_task(task);
      const Model model = build_ctn({.vocabulary = kVocab, .dim = kDim, .classes = task_classes(t), .fuzz = 0.02,
                                     .subspace = 3, .activation_noise = 0.05, .leaf_tanh = leaf_tanh});
      const SentimentTree tree = five_node_tree();
      const TreeModel tm(model, t, 0.5);
      const UnrolledTree u = tm.training_tree(tree);
      const Graph& g = u.graph;
      Values values = random_params(model.graph, 5);
      const Values feed = feed_values(u, tree, t);
      values.insert(feed.begin(), feed.end());
      GradcheckOptions options;
      options.inputs = false;
      options.key = {.seed = 9, .step = 2, .example = 4};
      const GradcheckResult r = gradcheck(g, values, options);
      INFO(r.worst);
      CHECK(r.passed);
      // Only the kept 3 of 4 dimensions carry gradient: 27 of T's 64 entries, 9 of Ml's and
      // Mr's 16, the rows of E the tree reads, C and c.
      CHECK(r.nonzero > 50);
    }
  }
}

TEST_CASE("the authors' init starts M at the identity plus small noise, and a model file keeps it") {
  constexpr int64_t n = 16;
  const Model model = build_ctn({.vocabulary = kVocab, .dim = n, .classes = 5, .init = "authors"});
  ParamStore<float> params(model.graph);
  params.initialize(model.graph, 7);
  const double m_limit = 0.5 / std::sqrt(static_cast<double>(n));
  for (const char* name : {"Ml", "Mr"}) {
    CAPTURE(name);
    const TensorView<const float> m = params.value(name);
    double off_diagonal_spread = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const double expected_centre = i == j ? 1.0 : 0.0;
        REQUIRE(std::abs(m[i * n + j] - expected_centre) <= m_limit + 1e-7);
        if (i != j) off_diagonal_spread = std::max(off_diagonal_spread, std::abs(double{m[i * n + j]}));
      }
    }
    CHECK(off_diagonal_spread > 0.5 * m_limit);  // drawn, not zero
  }
  const std::vector<std::pair<const char*, double>> limits = {{"T", 0.5 / n}, {"C", 1 / std::sqrt(n)}};
  for (const auto& item : limits) {
    const auto& name = item.first;  // not bindings: doctest captures them (clang < 16)
    const auto& limit = item.second;
    CAPTURE(name);
    const TensorView<const float> p = params.value(name);
    double largest = 0;
    for (int64_t i = 0; i < p.size(); ++i) largest = std::max(largest, std::abs(double{p[i]}));
    CHECK(largest <= limit + 1e-7);
    CHECK(largest > 0.5 * limit);
  }
  // Written and read back, the model draws the same values.
  const Model again = parse_model(write_model(model, ValueStorage::None, "").json, "again", ".");
  ParamStore<float> params_again(again.graph);
  params_again.initialize(again.graph, 7);
  CHECK(std::ranges::equal(params_again.values(), params.values()));
  CHECK_THROWS_WITH_AS(build_ctn({.vocabulary = kVocab, .dim = n, .init = "xavier"}),
                       doctest::Contains("init must be scaled or authors"), Error);
}

namespace {
// A tree graph's objective and parameter gradients, in double, under `key`.
std::pair<double, Values> objective_and_gradient(const Graph& g, const Values& values, const NoiseKey& key) {
  ParamStore<double> params(g);
  Tape<double> tape(g, params);
  for (const auto& [name, v] : values) {
    TensorView<double> dst = params.find(name) ? params.value(name) : tape.input(name);
    REQUIRE(static_cast<int64_t>(v.size()) == dst.size());
    std::copy(v.begin(), v.end(), dst.data);
  }
  tape.set_noise_key(key);
  tape.forward();
  params.zero_grad();
  tape.backward();
  Values grads;
  for (const ParamEntry& e : params.entries()) {
    const TensorView<double> gr = params.grad(e);
    grads[e.name].assign(gr.data, gr.data + gr.size());
  }
  return {tape.objective(), grads};
}
}  // namespace

TEST_CASE("perturbing the cell once trains the same child as perturbing each tree's graph") {
  // Parameter noise only: the child draws the same fuzz and the same subspace either way,
  // so objective and gradients agree to rounding.
  const Model model = build_ctn({.vocabulary = kVocab, .dim = kDim, .classes = 5, .fuzz = 0.3, .subspace = 3});
  const SentimentTree tree = five_node_tree();
  const TreeModel tm(model, SentimentTask::Fine);
  REQUIRE(tm.perturbs_cell());
  const UnrolledTree fast = tm.training_tree(tree);
  const Graph each_tree = build_pseudo_ensemble(tm.unroll(tree).graph, *model.ensemble).graph;
  // One draw of each parameter's noise for the whole tree, shared by every level.
  int64_t slices_of_T = 0;
  for (NodeId v : fast.graph.nodes()) slices_of_T += fast.graph[v].op->name == "gather_axes" &&
                                                    fast.graph[fast.graph.inputs(v)[0]].name == "T";
  CHECK(slices_of_T == 1);
  Values values = random_params(model.graph, 17);
  const Values feed = feed_values(fast, tree, SentimentTask::Fine);
  values.insert(feed.begin(), feed.end());
  for (uint64_t example : {1, 2}) {
    const NoiseKey key{.seed = 4, .step = 3, .example = example};
    const auto [loss, grad] = objective_and_gradient(fast.graph, values, key);
    const auto [expected_loss, expected_grad] = objective_and_gradient(each_tree, values, key);
    CHECK(loss == doctest::Approx(expected_loss).epsilon(1e-12));
    REQUIRE(grad.size() == expected_grad.size());
    for (const auto& item : grad) {
      const auto& name = item.first;  // not bindings: doctest captures them (clang < 16)
      const auto& g = item.second;
      CAPTURE(name);
      const std::vector<double>& expected = expected_grad.at(name);
      REQUIRE(g.size() == expected.size());
      for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == doctest::Approx(expected[i]).epsilon(1e-12));
    }
  }
  // Another tree's key draws another child.
  CHECK(objective_and_gradient(fast.graph, values, {.seed = 4, .step = 3, .example = 1}).first !=
        objective_and_gradient(fast.graph, values, {.seed = 4, .step = 3, .example = 2}).first);
}

TEST_CASE("activation noise in a perturbed cell draws anew at every level of the tree") {
  // Zero weights and biases: each node's vector is its noise alone (tanh(0) + noise), so
  // the levels' draws can be compared directly.
  const Model model = build_ctn({.vocabulary = kVocab, .dim = kDim, .classes = 5, .activation_noise = 0.5});
  const SentimentTree tree = five_node_tree();
  const TreeModel tm(model, SentimentTask::Fine);
  REQUIRE(tm.perturbs_cell());
  const UnrolledTree u = tm.training_tree(tree);
  Values values = random_params(model.graph, 19);
  for (auto& [name, v] : values) std::fill(v.begin(), v.end(), 0.0);
  const Values feed = feed_values(u, tree, SentimentTask::Fine);
  values.insert(feed.begin(), feed.end());
  const NoiseKey key{.seed = 2, .step = 1, .example = 7};
  const std::vector<double> h1 = testing::evaluate(u.graph, values, "c1/compose~gaussian@h1", 1, key);
  const std::vector<double> h2 = testing::evaluate(u.graph, values, "c1/compose~gaussian@h2", 1, key);
  REQUIRE(h1.size() == static_cast<size_t>(kDim));
  REQUIRE(h2.size() == static_cast<size_t>(kDim));
  double sum_sq = 0;
  for (size_t j = 0; j < h1.size(); ++j) {
    CHECK(h1[j] != h2[j]);
    sum_sq += h1[j] * h1[j];
  }
  CHECK(sum_sq > 0);
}

TEST_CASE("evaluation averages sampled subspaces alone: no fuzz and no activation noise at test time") {
  // The paper's test time: "we did not fuzz during testing". A model with fuzzing and
  // activation noise besides its subspaces must predict exactly as the model with the
  // subspaces alone, whatever the size of the other noise.
  std::string text;
  const char* shapes[] = {"(L (L w) (L (L x) (L y)))", "(L (L (L z) (L w)) (L y))", "(L (L x) (L z))"};
  for (int i = 0; i < 24; ++i) {
    std::string line = shapes[i % 3];
    for (char& c : line) {
      if (c == 'L') c = static_cast<char>('0' + (i * 7 + static_cast<int>(&c - line.data())) % 5);
    }
    text += line + "\n";
  }
  std::vector<SentimentTree> trees = parse_trees(text, "test");
  for (size_t i = 0; i < trees.size(); ++i) {
    for (size_t n = 0, leaf = 0; n < trees[i].word_id.size(); ++n) {
      if (trees[i].is_leaf(static_cast<int64_t>(n))) trees[i].word_id[n] = static_cast<int32_t>((i + 2 * leaf++) % kVocab);
    }
  }
  const auto evaluate = [&](const Model& model) {
    ParamStore<float> params(model.graph);
    params.initialize(model.graph, 3);
    return TreeModel(model, SentimentTask::Fine).evaluate(params, trees, 4, 11);
  };
  const TreeEvaluation noisy = evaluate(build_ctn(
      {.vocabulary = kVocab, .dim = kDim, .classes = 5, .fuzz = 2.0, .subspace = 2, .activation_noise = 2.0}));
  const TreeEvaluation subspaces = evaluate(build_ctn({.vocabulary = kVocab, .dim = kDim, .classes = 5, .subspace = 2}));
  CHECK(noisy.nodes == 8 * (5 + 5 + 3));
  CHECK(noisy.nodes_right == subspaces.nodes_right);
  CHECK(noisy.confusion == subspaces.confusion);
}

namespace {
// 40 trees of 5 nodes over words of the kVocab-word table, roots labeled 0..4 in turn.
std::vector<SentimentTree> forty_trees() {
  std::vector<SentimentTree> trees;
  for (int i = 0; i < 40; ++i) {
    SentimentTree t = parse_trees("(" + std::to_string(i % 5) + " (1 a) (4 (3 b) (0 c)))", "test")[0];
    const int vocab = static_cast<int>(kVocab);
    t.word_id = {i % vocab, (i / 2) % vocab, (i / 3 + 1) % vocab, -1, -1};
    trees.push_back(t);
  }
  return trees;
}

void check_same(const TreeEvaluation& a, const TreeEvaluation& b) {
  CHECK(a.roots == b.roots);
  CHECK(a.nodes == b.nodes);
  CHECK(a.nodes_right == b.nodes_right);
  CHECK(a.confusion == b.confusion);
}
}  // namespace

TEST_CASE("a fine-grained model on the binary task predicts positive where P(3) + P(4) > P(0) + P(1)") {
  const Model model = build_ctn({.vocabulary = kVocab, .dim = kDim, .classes = 5});
  const std::vector<SentimentTree> trees = forty_trees();  // a fifth neutral at the root, not evaluated
  int64_t predicted[2] = {0, 0};
  for (const uint64_t seed : {1, 2, 3, 4, 5, 6}) {
    CAPTURE(seed);
    ParamStore<float> params(model.graph);
    Values p = random_params(model.graph, seed);
    for (auto& [name, values] : p) {
      const TensorView<float> v = params.value(name);
      for (size_t i = 0; i < values.size(); ++i) {
        v.data[i] = static_cast<float>(values[i]);
        values[i] = v.data[i];  // the value as pens holds it
      }
    }
    std::vector<std::vector<int64_t>> expected(2, std::vector<int64_t>(2, 0));
    for (const SentimentTree& t : trees) {
      const int label = t.label[static_cast<size_t>(t.root())];
      if (label == 2) continue;
      const Vec v = direct_vectors(t, p, false)[static_cast<size_t>(t.root())];
      std::vector<double> prob(5);
      for (int64_t c = 0; c < 5; ++c) {
        double score = p["c"][static_cast<size_t>(c)];
        for (int64_t j = 0; j < kDim; ++j) score += v[j] * p["C"][static_cast<size_t>(j * 5 + c)];
        prob[static_cast<size_t>(c)] = std::exp(score);
      }
      const int positive = prob[3] + prob[4] > prob[0] + prob[1] ? 1 : 0;
      ++expected[label > 2 ? 1 : 0][positive];
      ++predicted[positive];
    }
    const TreeEvaluation e = TreeModel(model, SentimentTask::Fine).evaluate(params, trees, 0, 1, 64, true);
    CHECK(e.roots == 32);
    CHECK(e.confusion == expected);
  }
  // Both outcomes occur, so the fold is checked on both sides.
  CHECK(predicted[0] > 0);
  CHECK(predicted[1] > 0);
  const Model binary = build_ctn({.vocabulary = kVocab, .dim = kDim, .classes = 2});
  ParamStore<float> binary_params(binary.graph);
  CHECK_THROWS_WITH_AS(TreeModel(binary, SentimentTask::Binary).evaluate(binary_params, trees, 0, 1, 64, true),
                       doctest::Contains("only a fine-grained model"), Error);
}

TEST_CASE("a sampled subspace computes what the full model computes with the other dimensions zeroed") {
  const Model model = build_ctn({.vocabulary = kVocab, .dim = kDim, .classes = 5, .subspace = 2});
  const SentimentTree tree = five_node_tree();
  const TreeModel tm(model, SentimentTask::Fine);
  const UnrolledTree u = tm.unroll(tree);
  const Graph child = build_inference(u.graph, 1);
  Values values = random_params(model.graph, 7);
  const Values feed = feed_values(u, tree, SentimentTask::Fine, false);
  values.insert(feed.begin(), feed.end());
  const NoiseKey key{.seed = 3, .step = 1, .example = 2};
  const std::vector<double> kept = testing::evaluate(child, values, "c1/subspace:latent", 1, key);
  const std::vector<double> sampled = testing::evaluate(child, values, "c1/" + u.scores, 1, key);
  REQUIRE(kept.size() == 2);
  std::vector<char> keep(kDim, 0);
  for (double k : kept) keep[static_cast<size_t>(k)] = 1;
  Values masked = values;
  const auto zero = [&](const char* name, auto is_dropped) {
    std::vector<double>& p = masked[name];
    for (size_t i = 0; i < p.size(); ++i) {
      if (is_dropped(static_cast<int64_t>(i))) p[i] = 0;
    }
  };
  const auto dropped = [&](int64_t d) { return !keep[static_cast<size_t>(d)]; };
  zero("E", [&](int64_t i) { return dropped(i % kDim); });
  zero("T", [&](int64_t i) { return dropped(i / (kDim * kDim)) || dropped(i / kDim % kDim) || dropped(i % kDim); });
  zero("Ml", [&](int64_t i) { return dropped(i / kDim) || dropped(i % kDim); });
  zero("Mr", [&](int64_t i) { return dropped(i / kDim) || dropped(i % kDim); });
  zero("m", dropped);
  zero("C", [&](int64_t i) { return dropped(i / 5); });
  const std::vector<double> full = testing::evaluate(u.graph, masked, u.scores);
  REQUIRE(full.size() == sampled.size());
  for (size_t i = 0; i < full.size(); ++i) CHECK(sampled[i] == doctest::Approx(full[i]).epsilon(1e-12));
}

namespace {
// The subspace noise kind slices with gather_axes; a hand-built graph may use gather.
void check_lookup_first(bool by_axes) {
  CAPTURE(by_axes);
  Graph g;
  const NodeId E = g.param("E", Shape{7, 5}, {{"init", "normal"}, {"std", 1.0}});
  const NodeId ids = g.input("ids", Shape{4}, DType::Index);
  const NodeId kept = g.add("subset", {}, {{"n", int64_t{5}}, {"keep", int64_t{3}}, {"stream", int64_t{11}}}, "kept");
  const NodeId sliced = by_axes ? g.add("gather_axes", {E, kept}, {{"axes", std::vector<int64_t>{-1}}}, "sliced")
                                : g.add("gather", {E, kept}, {{"axis", int64_t{1}}}, "sliced");
  const NodeId fuzzed = g.add("gaussian_noise", {sliced}, {{"sigma", 0.3}, {"stream", int64_t{12}}}, "fuzzed");
  const NodeId rows = g.add("embedding", {fuzzed, ids}, {}, "rows");
  g.set_flag(rows, kOutput);
  const Graph rewritten = PruneDeadNodes().run(LookupFirst().run(g));
  CHECK(rewritten["rows"].op->name == "lookup_noise");
  CHECK(!rewritten.find("fuzzed"));  // the table-sized draw is gone
  const Values values{{"ids", {6, 0, 6, 2}}};
  for (uint64_t step : {1, 2}) {
    const NoiseKey key{.seed = 5, .step = step, .example = 0};
    const std::vector<double> before = testing::evaluate(g, values, "rows", 1, key);
    const std::vector<double> after = testing::evaluate(rewritten, values, "rows", 1, key);
    REQUIRE(before.size() == after.size());
    for (size_t i = 0; i < before.size(); ++i) CHECK(after[i] == doctest::Approx(before[i]).epsilon(1e-14));
    // A word used twice sees the same fuzzed vector, as with a fuzzed table.
    for (size_t j = 0; j < 3; ++j) CHECK(after[j] == after[6 + j]);
  }
}
}  // namespace

TEST_CASE("lookup-first: looking up rows of a fuzzed, sliced table equals fuzzing and slicing the rows") {
  check_lookup_first(false);
  check_lookup_first(true);
}

TEST_CASE("lookup-first leaves a table alone when the noise on it picks rows") {
  Graph g;
  const NodeId E = g.param("E", Shape{5, 5}, {{"init", "normal"}, {"std", 1.0}});
  const NodeId kept = g.add("subset", {}, {{"n", int64_t{5}}, {"keep", int64_t{3}}, {"stream", int64_t{11}}}, "kept");
  const NodeId sliced = g.add("gather_axes", {E, kept}, {{"axes", std::vector<int64_t>{0, 1}}}, "sliced");
  const NodeId rows = g.add("embedding", {sliced, g.input("ids", Shape{2}, DType::Index)}, {}, "rows");
  g.set_flag(rows, kOutput);
  const Graph rewritten = LookupFirst().run(g);
  CHECK(rewritten["rows"].op->name == "embedding");
  CHECK(rewritten.inputs(rewritten.at("rows"))[0] == rewritten.at("sliced"));
}

TEST_CASE("subspace sampling slices each parameter in one node, at the kept size") {
  const Model model = build_ctn({.vocabulary = kVocab, .dim = kDim, .classes = 5, .subspace = 2});
  const TreeModel tm(model, SentimentTask::Fine);
  const Graph child = build_inference(tm.unroll(five_node_tree()).graph, 1);
  std::vector<const Node*> slices_of_T;
  for (NodeId v : child.nodes()) {
    const Node& n = child[v];
    if (n.op->name.starts_with("gather") && child[child.inputs(v)[0]].name == "T") slices_of_T.push_back(&n);
  }
  REQUIRE(slices_of_T.size() == 1);
  CHECK(slices_of_T[0]->op->name == "gather_axes");
  CHECK(slices_of_T[0]->attrs.get_ints("axes") == std::vector<int64_t>{0, 1, 2});
}

TEST_CASE("a tree cell is checked against its ports") {
  Model model = build_ctn({.vocabulary = kVocab, .dim = kDim});
  TreePorts ports = *model.tree;
  CHECK_NOTHROW(check_tree_cell(model.graph, ports));
  ports.compose = "leaf";  // reads words, not left/right
  CHECK_ERROR_MENTIONS(check_tree_cell(model.graph, ports), "'leaf' reads input 'words'");
  ports = *model.tree;
  ports.words = "nowhere";
  CHECK_ERROR_MENTIONS(check_tree_cell(model.graph, ports), "no node 'nowhere' for the words port");
  TreeShape shape;
  shape.add({});
  shape.add({0, 1});
  CHECK_ERROR_MENTIONS(unroll_tree(model.graph, *model.tree, shape), "node 1 has child 1 (children come before their parent)");
  TreeShape wide;
  for (int i = 0; i < 3; ++i) wide.add({});
  wide.add({0, 1, 2});
  CHECK_ERROR_MENTIONS(unroll_tree(model.graph, *model.tree, wide), "node 3 has 3 children but the cell has 2 child ports");
}

TEST_CASE("the clean parent's evaluation ignores noise, reads averages at inference, and keeps its tapes per store") {
  const std::vector<SentimentTree> trees = forty_trees();
  const Model clean = build_ctn({.vocabulary = kVocab, .dim = kDim, .classes = 5});
  ParamStore<float> clean_params(clean.graph);
  clean_params.initialize(clean.graph, 3);
  const TreeModel clean_tm(clean, SentimentTask::Fine);
  const TreeEvaluation expected = clean_tm.evaluate(clean_params, trees, 0, 1, 7);
  REQUIRE(expected.nodes == 5 * 40);
  // Some nodes right and some wrong: the comparisons below can tell evaluations apart.
  REQUIRE(expected.nodes_right > 0);
  REQUIRE(expected.nodes_right < expected.nodes);

  SUBCASE("the cell's noise is a training noise") {
    const Model noisy = build_ctn({.vocabulary = kVocab, .dim = kDim, .classes = 5, .fuzz = 2.0, .activation_noise = 2.0});
    ParamStore<float> noisy_params(noisy.graph);
    copy_shared_values(noisy_params, clean_params, "the clean model");
    check_same(TreeModel(noisy, SentimentTask::Fine).evaluate(noisy_params, trees, 0, 1, 7), expected);
  }
  SUBCASE("an average marked at_inference is read in place of its source") {
    Model averaged = clean;
    Graph& g = averaged.graph;
    g.set_flag(g.param("T_average", clean_params.at("T").shape), kFrozen);
    g.add_average({.param = "T_average", .source = "T"});
    ParamStore<float> params(g);
    copy_shared_values(params, clean_params, "the clean model");
    // T itself is zeroed; the average holds the clean model's T.
    std::copy_n(clean_params.value("T").data, clean_params.value("T").size(), params.value("T_average").data);
    std::fill_n(params.value("T").data, params.value("T").size(), 0.0f);
    check_same(TreeModel(averaged, SentimentTask::Fine).evaluate(params, trees, 0, 1, 7), expected);
  }
  SUBCASE("kept tapes read the store's current values, and another store gets tapes of its own") {
    ParamStore<float> other(clean.graph);
    other.initialize(clean.graph, 4);
    const TreeEvaluation other_expected = TreeModel(clean, SentimentTask::Fine).evaluate(other, trees, 0, 1, 7);
    // A different function on these trees, or the comparisons could not fail.
    REQUIRE(other_expected.confusion != expected.confusion);
    check_same(clean_tm.evaluate(other, trees, 0, 1, 7), other_expected);
    check_same(clean_tm.evaluate(clean_params, trees, 0, 1, 7), expected);
    copy_shared_values(clean_params, other, "the other store");  // the first store's values change in place
    check_same(clean_tm.evaluate(clean_params, trees, 0, 1, 7), other_expected);
  }
  SUBCASE("products on oneDNN make the same predictions") {
    if (const std::string why = onednn_unavailable(); !why.empty()) {
      MESSAGE("oneDNN skipped: " << why);
      return;
    }
    TreeModel onednn(clean, SentimentTask::Fine);
    onednn.set_precision(Precision::Float32OneDnn);
    // One forest of the 40 trees: levels of 40 rows, past the bilinear op's packed form.
    const int64_t made = onednn_primitives_made();
    check_same(onednn.evaluate(clean_params, trees, 0, 1, 40), expected);
    CHECK(onednn_primitives_made() > made);
  }
}

TEST_CASE("a forest of trees computes each tree's scores and the sum of their losses") {
  const Model model = build_ctn({.vocabulary = kVocab, .dim = kDim, .classes = 5});
  const SentimentTree a = five_node_tree();
  SentimentTree b = parse_trees("(1 (0 z) (2 w))", "test")[0];
  b.word_id = {5, 1, -1};
  const TreeModel tm(model, SentimentTask::Fine);
  const Values params = random_params(model.graph, 11);
  const auto run = [&](const SentimentTree& t, const std::string& node) {
    const UnrolledTree u = tm.unroll(t);
    Values values = params;
    const Values feed = feed_values(u, t, SentimentTask::Fine);
    values.insert(feed.begin(), feed.end());
    std::vector<double> out = testing::evaluate(u.graph, values, node == "scores" ? u.scores : u.loss);
    if (node != "scores") return out;
    std::vector<double> by_node;  // scores in node order
    for (int64_t i = 0; i < t.size(); ++i) {
      const auto r = static_cast<size_t>(u.row_of[static_cast<size_t>(i)]);
      by_node.insert(by_node.end(), out.begin() + static_cast<long>(5 * r), out.begin() + static_cast<long>(5 * r + 5));
    }
    return by_node;
  };
  const Forest f = make_forest({&a, &b});
  CHECK(f.offsets == std::vector<int64_t>{0, 5});
  CHECK(f.roots == std::vector<int64_t>{4, 7});
  CHECK(run(f.nodes, "loss")[0] == doctest::Approx(run(a, "loss")[0] + run(b, "loss")[0]).epsilon(1e-12));
  std::vector<double> separate = run(a, "scores");
  const std::vector<double> second = run(b, "scores");
  separate.insert(separate.end(), second.begin(), second.end());
  const std::vector<double> together = run(f.nodes, "scores");
  REQUIRE(together.size() == separate.size());
  for (size_t i = 0; i < together.size(); ++i) CHECK(together[i] == doctest::Approx(separate[i]).epsilon(1e-12));
}

TEST_CASE("a PEA penalty on a tree model applies to the scores of every node, between two children") {
  Model model = build_ctn({.vocabulary = kVocab, .dim = kDim, .classes = 5, .subspace = 3, .activation_noise = 0.05});
  model.ensemble->children = 2;
  model.ensemble->penalties = {{.node = "scores", .kind = "kl", .lambda = 0.5, .rows = "all"}};
  const SentimentTree tree = five_node_tree();
  const TreeModel tm(model, SentimentTask::Fine);
  CHECK(!tm.perturbs_cell());
  const UnrolledTree u = tm.training_tree(tree);
  const Graph& g = u.graph;
  CHECK(g.find("pen/scores@tree/kl"));
  Values values = random_params(model.graph, 13);
  const Values feed = feed_values(u, tree, SentimentTask::Fine);
  values.insert(feed.begin(), feed.end());
  GradcheckOptions options;
  options.inputs = false;
  const GradcheckResult r = gradcheck(g, values, options);
  INFO(r.worst);
  CHECK(r.passed);
  model.ensemble->penalties[0].node = "compose";
  const TreeModel on_compose(model, SentimentTask::Fine);
  CHECK_ERROR_MENTIONS(on_compose.training_tree(tree), "penalty on 'compose'", "scores port");
}

}  // namespace test_tree
