// A step of sentence trees in groups on the pool's threads (TreeStepGraphs,
// Step::run_groups): the gradient is the sum of the trees' own gradients under their keys,
// whatever the grouping, step after step (the word vectors' gradient rows are cleared
// row by row); the update has the same bits on 1, 2 and 3 threads; and a tape can add
// its parameter gradients into an array of its own.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/models/ctn.h"
#include "pens/models/sst.h"
#include "pens/ops/parallel.h"
#include "pens/serialization/model_file.h"
#include "pens/train/loop/step.h"
#include "pens/train/optim/optimizer.h"
#include "pens/train/tasks/tree_model.h"
#include "tests/support/helpers.h"
#include "tests/support/paths.h"
#include "tests/support/tree_step.h"
#include "tests/support/treebank.h"

namespace test_tree_step {

using namespace pens;
using pens::testing::check_tree_step;
using pens::testing::random_id_trees;
using pens::testing::StepReference;

namespace {

constexpr int64_t kDim = 4;

// Step s's trees: `per` consecutive trees of the bank from s · per, each keyed by its
// index + 1, as the trainer keys them.
struct StepTrees {
  std::vector<const SentimentTree*> trees;
  std::vector<uint64_t> examples;
};
StepTrees step_trees(const std::vector<SentimentTree>& bank, int64_t s, size_t per) {
  StepTrees out;
  for (size_t i = 0; i < per; ++i) {
    const size_t index = static_cast<size_t>(s) * per + i;
    out.trees.push_back(&bank[index]);
    out.examples.push_back(index + 1);
  }
  return out;
}

// Each tree's graph on its own tape, its key {seed, step, example}, its gradient added
// into the store: what the step's groups must sum to.
StepReference tree_by_tree(const TreeModel& tm, ParamStore<float>& params,
                           const std::vector<const SentimentTree*>& trees, const std::vector<uint64_t>& examples,
                           uint64_t seed, int64_t step) {
  StepReference r;
  params.zero_grad();
  for (size_t i = 0; i < trees.size(); ++i) {
    const UnrolledTree u = tm.training_tree(*trees[i]);
    Tape<float> tape(u.graph, params);
    tm.feed(tape, u, *trees[i]);
    tape.set_noise_key({seed, static_cast<uint64_t>(step), examples[i]});
    tape.forward();
    r.objective += tape.objective();
    tape.backward();
  }
  r.grads.assign(params.grads().begin(), params.grads().end());
  return r;
}

CtnSpec spec_of(const std::string& kind, int64_t vocabulary, int64_t dim = kDim) {
  const bool fuzz = kind.find("+f") != std::string::npos, subspace = kind.find("+s") != std::string::npos;
  return {.vocabulary = vocabulary, .dim = dim, .classes = 5, .fuzz = fuzz ? 0.3 : 0.0,
          .subspace = subspace ? 3 : 0, .activation_noise = subspace ? 0.2 : 0.0};
}

}  // namespace

TEST_CASE("a grouped tree step's gradient is the sum of its trees', whatever the grouping, step after step") {
  constexpr int64_t kVocab = 30;
  const std::vector<SentimentTree> bank = random_id_trees(14, kVocab, 5);
  for (const std::string kind : {"ctn", "ctn+f", "ctn+s", "ctn+f+s"}) {
    CAPTURE(kind);
    Model model = build_ctn(spec_of(kind, kVocab));
    ParamStore<float> params(model.graph);
    params.initialize(model.graph, 3);
    const TreeModel tm(model, SentimentTask::Fine, 1.0 / 7);
    CHECK(tm.word_tables() == std::vector<std::string>{"E"});
    CHECK(tm.per_tree_parameters() == (kind != "ctn"));
    for (const size_t groups : {1, 3, 7}) {
      for (const int threads : {1, 2}) {
        CAPTURE(groups);
        CAPTURE(threads);
        set_threads(threads);
        // The second step's trees use other words than the first's.
        auto sgd = make_optimizer("sgd", params, {});
        Step step(params, *sgd, {}, 11);
        TreeStepGraphs graphs;
        for (int64_t s = 0; s < 2; ++s) {
          const StepTrees step_of = step_trees(bank, s, 7);
          const StepReference expected = tree_by_tree(tm, params, step_of.trees, step_of.examples, 11, s);
          graphs.assign(tm, params, step_of.trees, step_of.examples, 1.0, groups);
          CHECK(graphs.count() == groups);
          check_tree_step(graphs, step, s, params, expected);
        }
      }
    }
  }
  set_threads(1);
}

// A moving average (a weight average read at evaluation, a teacher's weights) moves once
// per step, as the model declares it, in one group or several. Before, no tree step moved
// them: TreeTapes keep none, and a tree's own graph did not carry them.
TEST_CASE("a tree step moves the model's moving averages once, whatever its trees, graphs and groups") {
  constexpr int64_t kVocab = 30;
  constexpr double kDecay = 0.5;
  const std::vector<SentimentTree> bank = random_id_trees(7, kVocab, 5);
  for (const std::string kind : {"ctn", "ctn+f"}) {
    CAPTURE(kind);
    Model model = build_ctn(spec_of(kind, kVocab));
    Graph& g = model.graph;
    const Shape t_shape = ParamStore<float>(g).at("T").shape;
    g.set_flag(g.param("T_average", t_shape), kFrozen);
    g.add_average({.param = "T_average", .source = "T", .decay = kDecay});
    for (const size_t groups : {1, 3}) {
      CAPTURE(groups);
      ParamStore<float> params(g);
      params.initialize(g, 3);
      const TreeModel tm(model, SentimentTask::Fine, 1.0 / 7);
      // Averages do not take a noisy model off TreeTapes: training does not read them.
      CHECK(tm.runs_tree_tapes());
      // The average starts away from T (initialize starts it at T), so that one update shows.
      const TensorView<float> start = params.value("T_average");
      for (int64_t i = 0; i < start.size(); ++i) start.data[i] = 0.25f * static_cast<float>(i % 5);
      const std::vector<float> before(start.data, start.data + start.size());
      auto sgd = make_optimizer("sgd", params, {});
      Step step(params, *sgd, {}, 11);
      TreeStepGraphs graphs;
      const StepTrees step_of = step_trees(bank, 0, 7);
      graphs.assign(tm, params, step_of.trees, step_of.examples, 1.0, groups);
      REQUIRE(graphs.run(step, {.step = 0, .learning_rate = 0.1, .momentum = 0}).finite);
      const TensorView<float> t = params.value("T"), average = params.value("T_average");
      int64_t moved = 0;
      for (int64_t i = 0; i < t.size(); ++i) {
        const auto expected = static_cast<float>(kDecay * before[static_cast<size_t>(i)] + (1 - kDecay) * t.data[i]);
        moved += average.data[i] != before[static_cast<size_t>(i)];
        REQUIRE(average.data[i] == doctest::Approx(expected).epsilon(1e-6));
      }
      CHECK(moved > t.size() / 2);
    }
  }
}

// A cell written as a model file alone (examples/sst/tree-lstm.model.json: a state of
// two parts sliced apart, five gates, dropout on the word vectors and before the
// classifier) trains on TreeTapes with the gradient of its graphs. Its parameters are not
// perturbed per tree, so a group's trees run as one forest keyed by its last tree: one
// group is the step's forest; four groups of the step's four trees are its trees.
TEST_CASE("the shipped Tree-LSTM's grouped step has the gradient of its forest's or trees' graphs") {
  Model model = load_model(pens::testing::source_dir() + "/examples/sst/tree-lstm.model.json");
  ParamStore<float> params(model.graph);
  params.initialize(model.graph, 3);
  const std::vector<SentimentTree> bank = random_id_trees(8, params.at("E").shape[0], 13, 12);
  const TreeModel tm(model, SentimentTask::Fine, 1.0 / 4);
  CHECK(tm.word_tables() == std::vector<std::string>{"E"});
  CHECK_FALSE(tm.per_tree_parameters());
  for (const size_t groups : {1, 4}) {
    for (const int threads : {1, 2}) {
      CAPTURE(groups);
      CAPTURE(threads);
      set_threads(threads);
      auto sgd = make_optimizer("sgd", params, {});
      Step step(params, *sgd, {}, 5);
      TreeStepGraphs graphs;
      for (int64_t s = 0; s < 2; ++s) {
        const StepTrees step_of = step_trees(bank, s, 4);
        StepReference expected;
        if (groups == 4) {
          expected = tree_by_tree(tm, params, step_of.trees, step_of.examples, 5, s);
        } else {
          const Forest forest = make_forest(step_of.trees);
          expected = tree_by_tree(tm, params, {&forest.nodes}, {step_of.examples.back()}, 5, s);
        }
        graphs.assign(tm, params, step_of.trees, step_of.examples, 1.0, groups);
        check_tree_step(graphs, step, s, params, expected);
      }
    }
  }
  set_threads(1);
}

// Evaluation averages sampled subspaces on TreeTapes of the sampling cell; each tree's
// mean probabilities are its sampled graphs' to the bit, whatever the threads.
TEST_CASE("sampled evaluation on TreeTapes gives the probabilities of each tree's sampled graphs, and their counts") {
  constexpr int64_t kVocab = 30;
  constexpr int64_t kDraws = 4;
  constexpr uint64_t kSeed = 11;
  const std::vector<SentimentTree> bank = random_id_trees(12, kVocab, 21, 15);
  for (const std::string kind : {"ctn+s", "ctn+f+s"}) {
    CAPTURE(kind);
    Model model = build_ctn(spec_of(kind, kVocab, 6));
    ParamStore<float> params(model.graph);
    params.initialize(model.graph, 3);
    const TreeModel tm(model, SentimentTask::Fine);
    const std::unique_ptr<TreeTape> tape = tm.sampling_tape(params);
    int64_t roots_right = 0, nodes_right = 0, nodes = 0;
    bool draws_differ = false;
    for (size_t t = 0; t < bank.size(); ++t) {
      const SentimentTree& tree = bank[t];
      const UnrolledTree u = tm.sampling_tree(tree);
      std::vector<double> expected(static_cast<size_t>(tree.size() * 5), 0.0);
      std::vector<float> first_draw;
      for (int64_t draw = 0; draw < kDraws; ++draw) {
        Tape<float> graph(u.graph, params);
        tm.feed(graph, u, tree, false);
        graph.set_noise_key({.seed = kSeed, .step = static_cast<uint64_t>(draw), .example = t + 1});
        graph.forward();
        const TensorView<const float> v = graph.value(u.scores);
        if (draw == 0) first_draw.assign(v.data, v.data + v.size());
        draws_differ = draws_differ || !std::equal(first_draw.begin(), first_draw.end(), v.data);
        for (int64_t i = 0; i < tree.size(); ++i) {
          for (int64_t k = 0; k < 5; ++k) {
            expected[static_cast<size_t>(i * 5 + k)] += v.data[u.row_of[static_cast<size_t>(i)] * 5 + k];
          }
        }
      }
      std::vector<double> got;
      tm.sampled_probabilities(*tape, tree, kDraws, kSeed, t + 1, got);
      CHECK(got == expected);
      for (int64_t i = 0; i < tree.size(); ++i) {
        const auto begin = expected.begin() + i * 5;
        const bool right = std::max_element(begin, begin + 5) - begin == tree.label[static_cast<size_t>(i)];
        ++nodes;
        nodes_right += right;
        if (i == tree.root()) roots_right += right;
      }
    }
    CHECK(draws_differ);
    // An evaluation's tape keeps no gradients.
    CHECK_THROWS_WITH_AS(tape->backward(), doctest::Contains("forward-only"), Error);
    for (const int threads : {1, 2}) {
      set_threads(threads);
      const TreeEvaluation e = tm.evaluate(params, bank, kDraws, kSeed);
      CHECK(e.roots == static_cast<int64_t>(bank.size()));
      CHECK(e.roots_right == roots_right);
      CHECK(e.nodes == nodes);
      CHECK(e.nodes_right == nodes_right);
    }
  }
  set_threads(1);
}

// Sentences of up to 40 words and n = 20: levels wide enough for the products' packed
// paths, and a fuzzed bias whose gradient array lies wherever the allocator puts it (its
// sums once depended on that alignment, so that even two runs on one thread differed).
TEST_CASE("a grouped tree step updates with the same bits on 1, 2 and 3 threads, run after run") {
  constexpr int64_t kVocab = 40;
  const std::vector<SentimentTree> bank = random_id_trees(24, kVocab, 9, 40);
  for (const std::string kind : {"ctn", "ctn+f", "ctn+f+s"}) {
    CAPTURE(kind);
    std::vector<std::vector<float>> finals;
    for (const int threads : {1, 2, 3, 1}) {
      set_threads(threads);
      Model model = build_ctn(spec_of(kind, kVocab, 20));
      ParamStore<float> params(model.graph);
      params.initialize(model.graph, 3);
      const TreeModel tm(model, SentimentTask::Fine, 1.0 / 8);
      auto adagrad = make_optimizer("adagrad", params, {});
      Step step(params, *adagrad, {}, 2);
      TreeStepGraphs graphs;
      for (int64_t s = 0; s < 3; ++s) {
        const StepTrees step_of = step_trees(bank, s, 8);
        graphs.assign(tm, params, step_of.trees, step_of.examples, 1.0, 4);
        REQUIRE(graphs.run(step, {.step = s, .learning_rate = 0.1, .momentum = 0}).finite);
      }
      finals.emplace_back(params.values().begin(), params.values().end());
    }
    REQUIRE(finals[0] != std::vector<float>(finals[0].size(), 0.0f));
    for (size_t t = 1; t < finals.size(); ++t) {
      CAPTURE(t + 1);
      REQUIRE(finals[t].size() == finals[0].size());
      CHECK(std::memcmp(finals[t].data(), finals[0].data(), finals[0].size() * sizeof(float)) == 0);
    }
  }
  set_threads(1);
}

TEST_CASE("a tape adds its parameter gradients into the array it is given, and only there") {
  const Model model = build_ctn(spec_of("ctn", 6));
  ParamStore<float> params(model.graph);
  params.initialize(model.graph, 1);
  const SentimentTree tree = random_id_trees(1, 6, 3)[0];
  const TreeModel tm(model, SentimentTask::Fine);
  const UnrolledTree u = tm.unroll(tree);
  Tape<float> tape(u.graph, params);
  tm.feed(tape, u, tree);
  params.zero_grad();
  tape.forward();
  tape.backward();
  const std::vector<float> in_store(params.grads().begin(), params.grads().end());
  REQUIRE(in_store != std::vector<float>(in_store.size(), 0.0f));

  std::vector<float> own(params.grads().size(), 0.0f);
  params.zero_grad();
  tape.add_param_gradients_to(own);
  tape.forward();
  tape.backward();
  CHECK(own == in_store);
  CHECK(std::all_of(params.grads().begin(), params.grads().end(), [](float g) { return g == 0.0f; }));
  CHECK(tape.grad("T").data == own.data() + params.at("T").offset);

  std::vector<float> wrong(3);
  CHECK_THROWS_WITH_AS(tape.add_param_gradients_to(wrong), doctest::Contains("an array of 3 values"), Error);
}

TEST_CASE("a TreeTape refuses a tree it cannot run, naming what is wrong") {
  const Model model = build_ctn(spec_of("ctn+f+s", 6));
  ParamStore<float> params(model.graph);
  params.initialize(model.graph, 1);
  const TreeModel tm(model, SentimentTask::Fine);
  const std::unique_ptr<TreeTape> tape = tm.tree_tape(params);
  CHECK_THROWS_WITH_AS(tape->forward(), doctest::Contains("forward() before set_tree()"), Error);
  const std::vector<int32_t> words{1, 2, -1}, labels{0, 1, 2};
  TreeShape good, bad;
  good.add({}), good.add({}), good.add({0, 1});
  bad.add({}), bad.add({2, 0}), bad.add({});
  CHECK_THROWS_WITH_AS(tape->set_tree(good, std::span(words).first(2), labels),
                       doctest::Contains("3 nodes but 2 word ids and 3 labels"), Error);
  CHECK_THROWS_WITH_AS(tape->set_tree(bad, words, labels), doctest::Contains("node 1 has child 2"), Error);
}

}  // namespace test_tree_step
