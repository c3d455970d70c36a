// A mean teacher: moving averages of the parameters, read by child 1 of a pseudo-ensemble
// in place of the student's; the Step moves them after each update, evaluation reads
// them, model files keep them, and the spec refuses what cannot work.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/graph/noise.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/mlp.h"
#include "pens/models/teacher.h"
#include "pens/serialization/model_file.h"
#include "pens/train/loop/step.h"
#include "pens/train/optim/optimizer.h"
#include "pens/train/tasks/trainer.h"
#include "tests/support/helpers.h"
#include "tests/support/temp_dir.h"

namespace test_teacher {

using namespace pens;

namespace {

constexpr int64_t kRows = 6;
constexpr double kDecay = 0.9;

// A 4-5-3 MLP with a teacher; Gaussian noise on x in every child.
Graph student_and_teacher(bool at_inference = true) {
  Graph g = build_mlp({.layers = {4, 5, 3}, .weight_std = 0.7});
  add_noise(g, g.at("x"), "gaussian", {{"sigma", 0.3}});
  add_teacher(g, kDecay, at_inference);
  return g;
}

PseudoEnsembleSpec mean_teacher_spec() {
  PseudoEnsembleSpec spec;
  spec.children = 2;
  spec.pairing = "child-child";
  spec.teacher = 1;
  spec.penalties = {{"logits", "softmax_l2", 1.0, "all", true}};
  return spec;
}

void feed(Tape<float>& tape, size_t = 0) {
  auto x = tape.input("x");
  for (int64_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.9f * static_cast<float>(i) + 0.4f);
  auto y = tape.input("y");
  for (int64_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 3);
}

std::vector<float> copy(TensorView<const float> v) { return {v.data, v.data + v.size()}; }

// Whether node `node` of g takes the node named `input` as one of its inputs.
bool reads(const Graph& g, const std::string& node, const std::string& input) {
  const std::vector<NodeId> inputs = g.inputs(g.at(node));
  return std::any_of(inputs.begin(), inputs.end(), [&](NodeId u) { return g[u].name == input; });
}

}  // namespace

TEST_CASE("mean teacher: frozen averages of every trainable parameter, starting equal to it") {
  const Graph g = student_and_teacher();
  CHECK(g.averages().size() == 4);  // W1, b1, W2, b2
  for (const char* p : {"W1", "b1", "W2", "b2"}) {
    const std::string t = std::string("teacher/") + p;
    REQUIRE(g.find(t));
    CHECK(g[t].has(kFrozen));
  }
  ParamStore<float> params(g);
  params.initialize(g, 4);
  CHECK(copy(params.value("teacher/W1")) == copy(params.value("W1")));
  CHECK(copy(params.value("teacher/b2")) == copy(params.value("b2")));
}

TEST_CASE("mean teacher: initialized from a model file without a teacher, it starts at the loaded student") {
  Model pretrained;
  pretrained.graph = build_mlp({.layers = {4, 5, 3}, .weight_std = 0.7});
  pretrained.values = std::make_shared<ParamStore<float>>(pretrained.graph);
  pretrained.values->initialize(pretrained.graph, 11);
  testing::TempDir dir;
  save_model(pretrained, dir / "student.json");

  const Graph g = student_and_teacher();
  ParamStore<float> params(g);
  params.initialize(g, 4);
  REQUIRE(copy(params.value("W1")) != copy(pretrained.values->value("W1")));
  initialize_from(params, g, dir / "student.json");
  for (const char* p : {"W1", "b1", "W2", "b2"}) {
    INFO(p);
    CHECK(copy(params.value(p)) == copy(pretrained.values->value(p)));
    CHECK(copy(params.value(std::string("teacher/") + p)) == copy(pretrained.values->value(p)));
  }

  // A file that holds the teacher's values keeps them.
  Model with_teacher;
  with_teacher.graph = g;
  with_teacher.values = std::make_shared<ParamStore<float>>(g);
  with_teacher.values->initialize(g, 5);
  with_teacher.values->value("teacher/W1").arr() += 1.0f;
  save_model(with_teacher, dir / "both.json");
  initialize_from(params, g, dir / "both.json");
  CHECK(copy(params.value("teacher/W1")) == copy(with_teacher.values->value("teacher/W1")));
  CHECK(copy(params.value("teacher/W1")) != copy(params.value("W1")));
}

TEST_CASE("mean teacher: child 1 reads the teacher's parameters, the student's children their own") {
  const PseudoEnsemble e = build_pseudo_ensemble(student_and_teacher(), mean_teacher_spec());
  const Graph& g = e.graph;
  CHECK(reads(g, "c1/a1", "teacher/W1"));
  CHECK(reads(g, "c1/logits", "teacher/b2"));
  CHECK(reads(g, "c2/a1", "W1"));
  CHECK(reads(g, "c2/logits", "b2"));
  CHECK(reads(g, "loss/parent/losses", "logits"));
}

TEST_CASE("mean teacher: after each update the teacher moves toward the updated student; no gradient reaches it") {
  const Graph parent = student_and_teacher();
  const PseudoEnsemble e = build_pseudo_ensemble(parent, mean_teacher_spec());
  ParamStore<float> params(parent);
  params.initialize(parent, 2);
  const auto sgd = make_optimizer("sgd", params);
  Step step(params, *sgd, {}, 5);
  Tape<float> tape(e.graph, params, {.batch = kRows});
  std::vector<float> teacher = copy(params.value("teacher/W1"));
  for (int64_t s = 0; s < 3; ++s) {
    REQUIRE(step.run({.step = s, .learning_rate = 0.5}, tape, feed).finite);
    // The penalty pulls the student toward the teacher; the teacher gets nothing.
    CHECK(params.grad("W1").arr().abs().maxCoeff() > 0);
    CHECK(params.grad("teacher/W1").arr().abs().maxCoeff() == 0);
    const std::vector<float> student = copy(params.value("W1"));
    for (size_t i = 0; i < teacher.size(); ++i) {
      teacher[i] = static_cast<float>(kDecay) * teacher[i] + static_cast<float>(1 - kDecay) * student[i];
      CHECK(params.value("teacher/W1")[static_cast<int64_t>(i)] == doctest::Approx(teacher[i]).epsilon(1e-6));
    }
  }
  CHECK(copy(params.value("teacher/W1")) != copy(params.value("W1")));
}

TEST_CASE("mean teacher: its running statistics follow its own batch statistics, which inference reads with its weights") {
  Graph parent = build_mlp({.layers = {4, 5, 3}, .weight_std = 0.7, .batch_norm = true, .batch_norm_decay = kDecay});
  add_noise(parent, parent.at("x"), "gaussian", {{"sigma", 0.3}});
  add_teacher(parent, kDecay);
  const PseudoEnsemble e = build_pseudo_ensemble(parent, mean_teacher_spec());
  bool found = false;
  for (const MovingAverage& a : e.graph.averages()) {
    if (a.param != "bn1/running_mean") continue;
    found = true;
    CHECK(a.child == 1);
    CHECK(a.source == "c1/bn1/mean");  // the teacher's pass, not the student's bn1/mean
  }
  REQUIRE(found);

  ParamStore<float> params(parent);
  params.initialize(parent, 2);
  const std::vector<float> before = copy(params.value("bn1/running_mean"));
  const auto sgd = make_optimizer("sgd", params);
  Step step(params, *sgd, {}, 5);
  Tape<float> tape(e.graph, params, {.batch = kRows});
  REQUIRE(step.run({.step = 0, .learning_rate = 0.5}, tape, feed).finite);
  const std::vector<float> teacher_mean = copy(tape.value("c1/bn1/mean"));
  const std::vector<float> student_mean = copy(tape.value("bn1/mean"));
  CHECK(teacher_mean != student_mean);
  for (size_t i = 0; i < teacher_mean.size(); ++i) {
    const float expected = static_cast<float>(kDecay) * before[i] + static_cast<float>(1 - kDecay) * teacher_mean[i];
    CHECK(params.value("bn1/running_mean")[static_cast<int64_t>(i)] == doctest::Approx(expected).epsilon(1e-6));
  }

  const Graph inference = build_inference(parent);
  CHECK(reads(inference, "bn1", "bn1/running_mean"));
  CHECK(reads(inference, "bn1", "bn1/running_var"));

  // A child that takes the parent's statistics computes none to follow.
  PseudoEnsembleSpec parent_statistics = mean_teacher_spec();
  parent_statistics.batch_statistics = {"parent"};
  CHECK_ERROR_MENTIONS(build_pseudo_ensemble(parent, parent_statistics), "bn1/running_mean",
                       "child 1 computes no 'bn1/mean'", "batch_statistics 'parent'");
  Model model;
  model.graph = parent;
  model.ensemble = mean_teacher_spec();
  CHECK(parse_model(write_model(model, ValueStorage::None, "").json, "mt.json", ".").graph.averages() ==
        parent.averages());
}

TEST_CASE("averaged weights with no teacher child: the running statistics stay the parent's") {
  Graph parent = build_mlp({.layers = {4, 5, 3}, .weight_std = 0.7, .batch_norm = true, .batch_norm_decay = kDecay});
  add_weight_averages(parent, kDecay);
  size_t statistics = 0;
  for (const MovingAverage& a : parent.averages()) {
    if (!of_batch_statistic(parent, a)) continue;
    ++statistics;
    CHECK(a.child == 0);
  }
  CHECK(statistics == 2);  // bn1's running mean and variance
  CHECK(reads(build_inference(parent), "a1", "average/W1"));
  CHECK_FALSE(parent.find("teacher/W1"));
  CHECK_THROWS_WITH(add_teacher(parent, kDecay, true, 0), doctest::Contains("the teacher is a child, 1 or more, got 0"));
}

TEST_CASE("averaged weights of the parameters a pattern names, and the patterns refused") {
  Graph g = build_mlp({.layers = {4, 5, 3}, .weight_std = 0.7, .batch_norm = true, .batch_norm_decay = kDecay});
  add_weight_averages(g, kDecay, "W.*");
  std::set<std::string> averaged;
  for (const MovingAverage& a : g.averages()) {
    if (!of_batch_statistic(g, a)) averaged.insert(a.source);
  }
  CHECK(averaged == std::set<std::string>{"W1", "W2"});
  CHECK(reads(build_inference(g), "a1", "average/W1"));
  Graph h = build_mlp({.layers = {4, 5, 3}});
  CHECK_THROWS_WITH(add_weight_averages(h, kDecay, "W["), doctest::Contains("'W[' is not a regular expression"));
  // A whole-name match: "W" alone names no parameter.
  CHECK_THROWS_WITH(add_weight_averages(h, kDecay, "W"), doctest::Contains("no trainable parameter's whole name matches 'W'"));
}

TEST_CASE("mean teacher: inference reads the teacher's parameters unless told otherwise") {
  CHECK(reads(build_inference(student_and_teacher(true)), "a1", "teacher/W1"));
  CHECK_FALSE(reads(build_inference(student_and_teacher(false)), "a1", "teacher/W1"));
}

TEST_CASE("mean teacher: model files keep it; the spec refuses a teacher it cannot use") {
  Model model;
  model.graph = student_and_teacher();
  model.ensemble = mean_teacher_spec();
  const std::string text = write_model(model, ValueStorage::None, "").json;
  const Model back = parse_model(text, "mt.json", ".");
  CHECK(back.graph.averages() == model.graph.averages());
  REQUIRE(back.ensemble);
  CHECK(back.ensemble->teacher == 1);

  PseudoEnsembleSpec spec = mean_teacher_spec();
  spec.pairing = "parent-child";
  CHECK_ERROR_MENTIONS(spec.validate(), "teacher", "child-child");
  spec = mean_teacher_spec();
  spec.loss_on = "child";
  CHECK_ERROR_MENTIONS(spec.validate(), "loss_on must be 'parent' with a teacher");
  spec = mean_teacher_spec();
  spec.teacher = 2;
  CHECK_ERROR_MENTIONS(spec.validate(), "teacher must be 0 (none) or 1");
  Graph no_teacher = build_mlp({.layers = {4, 5, 3}});
  CHECK_ERROR_MENTIONS(build_pseudo_ensemble(no_teacher, mean_teacher_spec()), "no moving average of a parameter");
}

}  // namespace test_teacher
