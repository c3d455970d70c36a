// PEA on trees on TreeTapes (train/tasks/tree_ensemble.h): the networks a pseudo-ensemble
// reads, each on a TreeTape of the cell perturbed into all its children, and a head over
// their scores. Its objective is the carrying network's loss plus λ times the mean over
// the tree's nodes of the penalty, computed here by hand; its gradient is the objective's
// (central differences along random directions); and a grouped step of such trees sums
// their gradients on 1 and 2 threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/ctn.h"
#include "pens/models/sst.h"
#include "pens/ops/parallel.h"
#include "pens/train/loop/step.h"
#include "pens/train/optim/optimizer.h"
#include "pens/train/tasks/tree_ensemble.h"
#include "pens/train/tasks/tree_model.h"
#include "tests/support/helpers.h"
#include "tests/support/tree_step.h"
#include "tests/support/treebank.h"

namespace test_tree_ensemble {

using namespace pens;
using pens::testing::check_tree_step;
using pens::testing::random_id_trees;
using pens::testing::StepReference;

namespace {

constexpr int64_t kVocab = 20;
constexpr double kSmoothing = 1e-4;

// A CTN+F+S with penalty `kind` (λ 0.7) on its scores between `children` networks.
Model penalized_ctn(const std::string& kind, int64_t children, const std::string& pairing,
                    const std::string& loss_on) {
  Model model = build_ctn({.vocabulary = kVocab, .dim = 4, .classes = 5, .fuzz = 0.3, .subspace = 3,
                           .activation_noise = 0.2});
  PseudoEnsembleSpec& spec = *model.ensemble;
  spec.children = children, spec.pairing = pairing, spec.loss_on = loss_on, spec.smoothing = kSmoothing;
  spec.penalties = {{.node = "scores", .kind = kind, .lambda = 0.7}};
  return model;
}

// The smoothed class probabilities of one row, as the penalty kinds smooth them.
std::vector<double> smoothed(std::span<const float> row) {
  const double top = *std::max_element(row.begin(), row.end());
  double sum = 0;
  std::vector<double> p;
  for (float v : row) sum += std::exp(v - top), p.push_back(std::exp(v - top));
  const auto c = static_cast<double>(row.size());
  for (double& x : p) x = (x / sum + kSmoothing) / (1 + c * kSmoothing);
  return p;
}

// λ · mean over rows of KL between two networks' scores, symmetrised unless parent-child.
double kl_penalty(std::span<const float> a, std::span<const float> b, int64_t classes, bool symmetrised) {
  const auto c = static_cast<size_t>(classes);
  double total = 0;
  const size_t rows = a.size() / c;
  for (size_t r = 0; r < rows; ++r) {
    const std::vector<double> p = smoothed(a.subspan(r * c, c)), q = smoothed(b.subspan(r * c, c));
    double ab = 0, ba = 0;
    for (size_t k = 0; k < c; ++k) ab += p[k] * std::log(p[k] / q[k]), ba += q[k] * std::log(q[k] / p[k]);
    total += symmetrised ? (ab + ba) / 2 : ab;
  }
  return total / static_cast<double>(rows);
}

struct Ensemble {
  Graph cell;
  TreePorts parent;
  std::vector<TreePorts> children;
};

Ensemble perturbed(const Model& model) {
  Ensemble e;
  e.parent = *model.tree;
  const TreePorts& p = e.parent;
  for (const std::vector<std::string>& child :
       perturb_cell(model.graph, {p.leaf, p.compose, p.scores}, &e.cell, model.ensemble->children)) {
    TreePorts c = p;
    c.leaf = child[0], c.compose = child[1], c.scores = child[2];
    e.children.push_back(c);
  }
  return e;
}

std::vector<int32_t> labels_of(const SentimentTree& tree) {
  std::vector<int32_t> labels;
  for (int32_t l : tree.label) labels.push_back(l);
  return labels;
}

}  // namespace

TEST_CASE("a tree ensemble's objective is its loss plus lambda times the mean penalty over the tree's nodes") {
  const SentimentTree tree = random_id_trees(1, kVocab, 3, 12)[0];
  REQUIRE(tree.size() >= 9);
  const std::vector<int32_t> labels = labels_of(tree);
  const NoiseKey key{.seed = 5, .step = 2, .example = 7};
  struct Case {
    int64_t children;
    std::string pairing, loss_on;
  };
  for (const Case& c : {Case{2, "child-child", "child"}, Case{3, "child-child", "children"},
                        Case{2, "parent-child", "parent"}}) {
    CAPTURE(c.children);
    CAPTURE(c.pairing);
    CAPTURE(c.loss_on);
    const Model model = penalized_ctn("kl", c.children, c.pairing, c.loss_on);
    ParamStore<float> params(model.graph);
    params.initialize(model.graph, 4);
    const Ensemble e = perturbed(model);
    TreeEnsembleTape tape(e.cell, e.parent, e.children, *model.ensemble, params, 0.25);
    tape.set_tree(tree.shape, tree.word_id, labels);
    tape.set_noise_key(key);
    tape.forward();
    const bool parent_read = c.pairing == "parent-child";
    CHECK((tape.network(0) != nullptr) == parent_read);
    for (int64_t k = 1; k <= c.children; ++k) REQUIRE(tape.network(static_cast<size_t>(k)) != nullptr);

    // The loss: what a TreeTape of the carrying network computes alone under the key.
    double loss = 0;
    const auto alone = [&](const TreePorts& ports, double scale) {
      TreeTape t(e.cell, ports, params, scale);
      t.set_tree(tree.shape, tree.word_id, labels);
      t.set_noise_key(key);
      t.forward();
      return t.objective();
    };
    if (c.loss_on == "child") loss = alone(e.children[0], 0.25);
    if (c.loss_on == "parent") loss = alone(e.parent, 0.25);
    if (c.loss_on == "children") {
      for (const TreePorts& ports : e.children) loss += alone(ports, 0.25 / static_cast<double>(c.children));
    }
    REQUIRE(loss > 0);

    // The penalty over the networks' scores: the children draw apart, the parent is clean.
    const auto scores = [&](size_t k) { return tape.network(k)->scores(); };
    CHECK_FALSE(std::equal(scores(1).begin(), scores(1).end(), scores(2).begin()));
    double penalty = 0;
    if (parent_read) {
      TreeTape clean(model.graph, *model.tree, params, 1.0);
      clean.set_tree(tree.shape, tree.word_id, labels);
      clean.forward();
      CHECK(std::equal(clean.scores().begin(), clean.scores().end(), scores(0).begin()));
      for (int64_t k = 1; k <= c.children; ++k) penalty += kl_penalty(scores(0), scores(static_cast<size_t>(k)), 5, false);
      penalty /= static_cast<double>(c.children);
    } else {
      int pairs = 0;
      for (int64_t i = 1; i <= c.children; ++i) {
        for (int64_t j = i + 1; j <= c.children; ++j, ++pairs) {
          penalty += kl_penalty(scores(static_cast<size_t>(i)), scores(static_cast<size_t>(j)), 5, true);
        }
      }
      penalty /= pairs;
    }
    REQUIRE(penalty > 0);
    CHECK(tape.penalty() == doctest::Approx(0.7 * penalty).epsilon(1e-4));
    CHECK(tape.objective() == doctest::Approx(loss + 0.7 * penalty).epsilon(1e-5));

    // The λ schedule scales the penalty.
    tape.set_lambda_scale(0.5);
    tape.forward();
    CHECK(tape.penalty() == doctest::Approx(0.35 * penalty).epsilon(1e-4));
  }
}

TEST_CASE("a tree ensemble's gradient is its objective's, along random directions") {
  std::mt19937_64 rng(8);
  const SentimentTree tree = random_id_trees(1, kVocab, 8, 10)[0];
  REQUIRE(tree.size() >= 7);
  const std::vector<int32_t> labels = labels_of(tree);
  for (const std::string kind : {"kl", "l2"}) {
    CAPTURE(kind);
    const Model model = penalized_ctn(kind, 2, "child-child", "child");
    ParamStore<float> params(model.graph);
    params.initialize(model.graph, 6);
    const Ensemble e = perturbed(model);
    TreeEnsembleTape tape(e.cell, e.parent, e.children, *model.ensemble, params, 1.0);
    tape.set_tree(tree.shape, tree.word_id, labels);
    tape.set_noise_key({.seed = 1, .step = 0, .example = 3});
    const auto objective = [&] {
      tape.forward();
      return tape.objective();
    };
    params.zero_grad();
    objective();
    REQUIRE(tape.penalty() > 0);
    tape.backward();
    const std::vector<float> grads(params.grads().begin(), params.grads().end());
    std::normal_distribution<float> normal;
    for (int direction = 0; direction < 3; ++direction) {
      std::vector<float> d(grads.size());
      for (float& x : d) x = normal(rng);
      double expected = 0;
      for (size_t i = 0; i < d.size(); ++i) expected += double{grads[i]} * d[i];
      // Central differences of the objective, noise replayed from the same key.
      constexpr float kStep = 1e-3f;
      const std::vector<float> start(params.values().begin(), params.values().end());
      const auto at = [&](float t) {
        for (size_t i = 0; i < d.size(); ++i) params.values()[i] = start[i] + t * d[i];
        return objective();
      };
      const double measured = (at(kStep) - at(-kStep)) / (2.0 * kStep);
      std::copy(start.begin(), start.end(), params.values().begin());
      CAPTURE(direction);
      CHECK(std::abs(expected) > 0.05);
      CHECK(measured == doctest::Approx(expected).epsilon(0.005));
    }
  }
}

TEST_CASE("a grouped step of penalized trees sums each tree's ensemble gradient, on 1 and 2 threads") {
  const std::vector<SentimentTree> bank = random_id_trees(6, kVocab, 12, 8);
  const Model model = penalized_ctn("kl", 2, "child-child", "child");
  ParamStore<float> params(model.graph);
  params.initialize(model.graph, 2);
  const TreeModel tm(model, SentimentTask::Fine, 1.0 / 6);
  REQUIRE(tm.runs_tree_ensembles());
  CHECK_THROWS_WITH_AS(tm.tree_tape(params), doctest::Contains("graph per tree"), Error);
  std::vector<const SentimentTree*> trees;
  std::vector<uint64_t> examples;
  for (size_t i = 0; i < bank.size(); ++i) trees.push_back(&bank[i]), examples.push_back(i + 1);

  // Each tree's ensemble under its key {seed, step, example}, its gradient summed.
  constexpr uint64_t kSeed = 9;
  constexpr double kLambdaScale = 0.3;
  StepReference expected;
  params.zero_grad();
  const std::unique_ptr<TreeEnsembleTape> one = tm.ensemble_tape(params);
  one->set_lambda_scale(kLambdaScale);
  std::vector<int32_t> labels;
  for (size_t i = 0; i < trees.size(); ++i) {
    tm.set_tree_of(*one, *trees[i], labels);
    one->set_noise_key({kSeed, 0, examples[i]});
    one->forward();
    expected.objective += one->objective();
    one->backward();
  }
  expected.grads.assign(params.grads().begin(), params.grads().end());

  for (const size_t groups : {1, 3}) {
    for (const int threads : {1, 2}) {
      CAPTURE(groups);
      CAPTURE(threads);
      set_threads(threads);
      auto sgd = make_optimizer("sgd", params, {});
      Step step(params, *sgd, {}, kSeed);
      TreeStepGraphs graphs;
      graphs.assign(tm, params, trees, examples, kLambdaScale, groups);
      check_tree_step(graphs, step, 0, params, expected);
    }
  }
  set_threads(1);
}

}  // namespace test_tree_ensemble
