// Batch statistics by part (SplitStatistics, graph/pass.h): the labeled and the unlabeled
// rows of a batch normalised each with their own statistics, on a ladder network whose
// denoising costs cover the unlabeled rows.
#include <doctest/doctest.h>

#include <cmath>

#include "pens/autodiff/gradcheck.h"
#include "pens/autodiff/tape.h"
#include "pens/graph/pass.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/ladder.h"
#include "pens/serialization/model_file.h"
#include "tests/support/helpers.h"

namespace test_split_statistics {

using namespace pens;

namespace {

constexpr int64_t kRows = 7, kLabeled = 3;

Model split_ladder() {
  Model model = build_ladder({.layers = {6, 5, 4, 3}, .noise = 0.3, .denoising = {2, 1, 0.5, 0.25}});
  model.ensemble->statistics_by_part = true;
  for (PenaltyTerm& t : model.ensemble->penalties) t.rows = "unlabeled";
  return model;
}

void run_forward(Tape<double>& tape) {
  auto x = tape.input("x");
  for (int64_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.37 * static_cast<double>(i));
  auto y = tape.input("y");
  for (int64_t i = 0; i < y.size(); ++i) y[i] = static_cast<double>(i % 3);
  tape.set_noise_key({3, 4});
  tape.forward();
}

// Column j of rows [lo, hi) of a [rows, width] value: its mean and biased variance.
template <class Values>
std::pair<double, double> moments(const Values& a, int64_t width, int64_t j, int64_t lo, int64_t hi) {
  double mean = 0, var = 0;
  for (int64_t r = lo; r < hi; ++r) mean += a[r * width + j];
  mean /= static_cast<double>(hi - lo);
  for (int64_t r = lo; r < hi; ++r) var += std::pow(a[r * width + j] - mean, 2);
  return {mean, var / static_cast<double>(hi - lo)};
}

}  // namespace

TEST_CASE("statistics by part: labeled and unlabeled rows are normalised each with their own statistics") {
  const Model model = split_ladder();
  const PseudoEnsemble pe = build_pseudo_ensemble(model.graph, *model.ensemble, {.labeled_rows = kLabeled});
  ParamStore<double> params(pe.graph);
  params.initialize(pe.graph, 5);
  Tape<double> tape(pe.graph, params, {.batch = kRows});
  run_forward(tape);
  for (const std::string prefix : {"", "c1/"}) {  // the clean parent and the noisy child alike
    CAPTURE(prefix);
    const auto a = tape.value(prefix + "a2"), mean = tape.value(prefix + "z2/mean"), var = tape.value(prefix + "z2/var");
    // Before its noise, the child's z2 is the normalised value; the parent's has no noise.
    const auto z = tape.value(prefix + "z2");
    REQUIRE(z.size() == kRows * 4);
    for (int64_t j = 0; j < 4; ++j) {
      const auto [mean_l, var_l] = moments(a, 4, j, 0, kLabeled);
      const auto [mean_u, var_u] = moments(a, 4, j, kLabeled, kRows);
      // The block's own statistics, which the running statistics follow, are the labeled rows'.
      CHECK(mean[j] == doctest::Approx(mean_l).epsilon(1e-12));
      CHECK(var[j] == doctest::Approx(var_l).epsilon(1e-12));
      for (int64_t r = 0; r < kRows; ++r) {
        const bool labeled = r < kLabeled;
        const double expected =
            (a[r * 4 + j] - (labeled ? mean_l : mean_u)) / std::sqrt((labeled ? var_l : var_u) + 1e-5);
        CHECK(z[r * 4 + j] == doctest::Approx(expected).epsilon(1e-9));
      }
    }
  }
  // The noise stays on the block's value; the decoder normalises its estimates with the
  // clean unlabeled rows' statistics, the rows its costs cover.
  CHECK(pe.graph.find("c1/z2~gaussian").has_value());
  const NodeId clean_mean = pe.graph.at("z2/mean/clean");
  CHECK(pe.graph[pe.graph.inputs(clean_mean)[0]].name == "z2/mean/unlabeled");
  // Inference keeps one normalization with the running statistics.
  const Graph inference = build_inference(model.graph);
  CHECK_FALSE(inference.find("z2/mean/unlabeled").has_value());
  CHECK(inference.find("z2").has_value());
}

TEST_CASE("statistics by part: the objective's gradient against finite differences, rows restricted or not") {
  const Model model = split_ladder();
  for (const bool restrict : {true, false}) {
    CAPTURE(restrict);
    const PseudoEnsemble pe =
        build_pseudo_ensemble(model.graph, *model.ensemble, {.labeled_rows = kLabeled, .restrict_rows = restrict});
    GradcheckOptions options;
    options.batch = kRows;
    const GradcheckResult r = gradcheck(pe.graph, {{"y", {0, 1, 2}}}, options);
    INFO(r.worst);
    CHECK(r.passed);
    CHECK(r.variables > 200);
  }
  // Restricting the decoder to the unlabeled rows changes nothing.
  std::vector<double> objectives;
  for (const bool restrict : {true, false}) {
    const PseudoEnsemble pe =
        build_pseudo_ensemble(model.graph, *model.ensemble, {.labeled_rows = kLabeled, .restrict_rows = restrict});
    ParamStore<double> params(pe.graph);
    params.initialize(pe.graph, 5);
    Tape<double> tape(pe.graph, params, {.batch = kRows});
    run_forward(tape);
    objectives.push_back(tape.objective());
  }
  CHECK(objectives[0] == doctest::Approx(objectives[1]).epsilon(1e-12));
}

TEST_CASE("statistics by part: all rows labeled is one part; model files keep the setting; bad uses are refused") {
  const Model model = split_ladder();
  // Without unlabeled rows the graph is the one-part graph.
  Model whole = model;
  whole.ensemble->statistics_by_part = false;
  for (PenaltyTerm& t : whole.ensemble->penalties) t.rows = "all";
  Model all_labeled = model;
  for (PenaltyTerm& t : all_labeled.ensemble->penalties) t.rows = "all";
  CHECK(build_pseudo_ensemble(all_labeled.graph, *all_labeled.ensemble).graph.size() ==
        build_pseudo_ensemble(whole.graph, *whole.ensemble).graph.size());
  CHECK_FALSE(build_pseudo_ensemble(all_labeled.graph, *all_labeled.ensemble).graph.find("z1/mean/unlabeled").has_value());

  const Model again = parse_model(write_model(model, ValueStorage::None, "").json, "m.json", ".");
  REQUIRE(again.ensemble);
  CHECK(again.ensemble->statistics_by_part);
  CHECK(write_model(model, ValueStorage::None, "").json.find("\"statistics_by_part\": true") != std::string::npos);

  PseudoEnsembleSpec parent_statistics = *model.ensemble;
  parent_statistics.batch_statistics = {"parent"};
  CHECK_ERROR_MENTIONS(parent_statistics.validate(), "statistics_by_part", "batch_statistics 'own'");

  // A running statistic that is not a batch normalisation's mean cannot be split.
  Graph g;
  const NodeId x = g.input("x", {kBatch, 3});
  const NodeId m = g.add("mean", {x}, {{"axes", std::vector<int64_t>{0}}}, "m");
  const NodeId p = g.param("p", {3});
  g.set_flag(p, kFrozen);
  g.add_average({.param = "p", .source = "m", .decay = 0.9});
  g.set_flag(g.add("add", {x, m}, {}, "out"), kOutput);
  CHECK_ERROR_MENTIONS(SplitStatistics(2).run(g), "'m'", "no batch_variance");
}

}  // namespace test_split_statistics
