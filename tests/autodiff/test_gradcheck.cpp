// End-to-end gradient checks of whole models, not just single ops.
#include <doctest/doctest.h>

#include "pens/autodiff/gradcheck.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/mlp.h"
#include "pens/ops/check_case.h"
#include "pens/ops/op.h"
#include "pens/serialization/model_file.h"
#include "tests/support/paths.h"

namespace test_gradcheck {

using namespace pens;

namespace {
std::map<std::string, std::vector<double>> labels_for(int64_t batch, int64_t classes) {
  std::vector<double> y;
  for (int64_t i = 0; i < batch; ++i) y.push_back(static_cast<double>((i * 7) % classes));
  return {{"y", y}};
}
}  // namespace

TEST_CASE("gradient of a 2-hidden-layer MLP's loss with respect to every parameter") {
  // Weights large enough for every unit to matter, ReLU kinks are measure-zero.
  const Graph g = build_mlp({.layers = {6, 5, 4, 3}, .weight_std = 0.7, .hidden_bias = 0.1});
  GradcheckOptions options;
  options.batch = 4;
  const GradcheckResult r = gradcheck(g, labels_for(4, 3), options);
  INFO(r.worst);
  CHECK(r.passed);
  CHECK(r.variables == 6 * 5 + 5 + 5 * 4 + 4 + 4 * 3 + 3 + 4 * 6);  // parameters and the input x
  CHECK(r.targets == 1);
  CHECK(r.max_error < 1e-6);
}

TEST_CASE("gradient of the dropout MLP and of the squared-hinge loss, noise frozen by key") {
  for (const char* loss : {"softmax_xent", "squared_hinge"}) {
    INFO(loss);
    const Graph g = build_mlp({.layers = {6, 5, 4, 3},
                               .input_dropout = 0.2,
                               .hidden_dropout = 0.5,
                               .weight_std = 0.7,
                               .loss = loss});
    GradcheckOptions options;
    options.batch = 5;
    const GradcheckResult r = gradcheck(g, labels_for(5, 3), options);
    INFO(r.worst);
    CHECK(r.passed);
  }
}

TEST_CASE("a frozen parameter is not a variable of the check") {
  Graph g = build_mlp({.layers = {4, 3, 2}, .weight_std = 0.5});
  g.set_flag(g.at("W1"), kFrozen);
  GradcheckOptions options;
  options.batch = 2;
  const GradcheckResult r = gradcheck(g, labels_for(2, 2), options);
  CHECK(r.passed);
  CHECK(r.variables == 3 + 3 * 2 + 2 + 2 * 4);
}

namespace {

// tanh with the sign of its VJP flipped: the kind of bug the checker exists to catch.
struct TanhWrongVjp {
  static constexpr const char* kName = "test_tanh_wrong_vjp";
  static constexpr const char* kSummary = "tanh whose backward has the wrong sign (a test op)";
  static std::vector<InputSlot> inputs() { return {{"x"}}; }
  static ValueInfo infer(const InferCtx& ctx) {
    infer::expect(ctx, 0, -1);
    return ctx.in[0];
  }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    args.out.arr() = args.in[0].arr().tanh();
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    args.gin[0].arr() -= args.gout.arr() * (T(1) - args.out.arr().square());
  }
  static void check(CheckBuilder& b) { b.check({b.real({2, 3})}); }
};

// The narrow model of tests/data/models/tanh-vc-narrow.json (12-6-5-4-3, tanh, zero biases,
// V^c on the hidden layers): its pseudo-ensemble's training graph.
Graph narrow_vc_graph() {
  const Model model = load_model(pens::testing::source_dir() + "/tests/data/models/tanh-vc-narrow.json");
  return build_pseudo_ensemble(model.graph, model.ensemble.value()).graph;
}

}  // namespace

TEST_CASE("a correct gradient does not fail on truncation error: V^c at zero biases, any step") {
  // The plain central difference at h misses by c·h² (the 3.9e-5 at h = 1e-5);
  // the extrapolated one agrees.
  const Graph g = narrow_vc_graph();
  for (const double step : {1e-4, 1e-5, 1e-6}) {
    INFO("step " << step);
    GradcheckOptions options;
    options.batch = 8;
    options.inputs = false;
    options.step = step;
    const GradcheckResult r = gradcheck(g, labels_for(8, 3), options);
    INFO(r.worst);
    CHECK(r.passed);
    CHECK(r.max_plain_error > options.tolerance);  // the case is a real one at every step
    CHECK(r.truncated > 0);
  }
}

TEST_CASE("a wrong VJP fails, whole or sampled, and the worst entry names it") {
  // The first hidden layer's activation becomes the wrong op (not registered: the graph
  // node points at its definition directly, so no other test sees it).
  const OpDef wrong = define_op<TanhWrongVjp>();
  Graph g = build_mlp({.layers = {6, 5, 4, 3}, .weight_std = 0.7, .hidden_bias = 0.1});
  g.node(g.at("h1")).op = &wrong;
  for (const int64_t sample : {int64_t{0}, int64_t{4}}) {
    INFO("sample " << sample);
    GradcheckOptions options;
    options.batch = 4;
    options.sample = sample;
    const GradcheckResult r = gradcheck(g, labels_for(4, 3), options);
    CHECK_FALSE(r.passed);
    CHECK(r.max_error > 0.5);
    CHECK(r.worst.find("extrapolated") != std::string::npos);  // refinement did not rescue it
  }
}

TEST_CASE("sampling: a fixed number of elements per tensor, the largest gradients and zeros among them") {
  const Graph g = build_mlp({.layers = {20, 30, 3}, .weight_std = 0.5, .hidden_bias = 0});
  GradcheckOptions options;
  options.batch = 4;
  options.inputs = false;
  options.sample = 16;
  std::vector<std::pair<int64_t, int64_t>> calls;
  options.progress = [&](int64_t done, int64_t total) { calls.emplace_back(done, total); };
  const GradcheckResult r = gradcheck(g, labels_for(4, 3), options);
  CHECK(r.passed);
  CHECK(r.variables == 20 * 30 + 30 + 30 * 3 + 3);
  // W1 (600) and W2 (90) and b1 (30) are sampled to 16 each; b2 (3) is checked whole.
  CHECK(r.checked == 16 + 16 + 16 + 3);
  REQUIRE(calls.size() == static_cast<size_t>(r.checked));
  CHECK(calls.back() == std::pair<int64_t, int64_t>{r.checked, r.checked});
  // The same sample every time.
  const GradcheckResult again = gradcheck(g, labels_for(4, 3), options);
  CHECK(again.worst == r.worst);
  CHECK(again.max_error == r.max_error);
}

}  // namespace test_gradcheck
