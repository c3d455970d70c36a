// The perturb and penalty passes: structure, determinism, gradients, and the paper's
// dropout equivalence.
#include <doctest/doctest.h>

#include <algorithm>
#include <bitset>
#include <cmath>
#include <iomanip>
#include <set>

#include "pens/autodiff/gradcheck.h"
#include "pens/autodiff/tape.h"
#include "pens/graph/infer.h"
#include "pens/graph/noise.h"
#include "pens/graph/penalty.h"
#include "pens/graph/printers.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/mlp.h"
#include "tests/support/eval.h"
#include "tests/support/helpers.h"

namespace test_pseudo_ensemble {

using namespace pens;

namespace {

MlpSpec pea_mlp(std::vector<int64_t> layers) {
  // Large weights and a non-zero output bias keep every unit and every logit row away
  // from zero, where finite differences of the direction penalty lose their accuracy.
  return {.layers = std::move(layers),
          .weight_std = 0.7,
          .output_bias = 0.2,
          .mask_input = 0.2,
          .mask_hidden = 0.5,
          .gaussian_input = 0.1,
          .gaussian_bias = 0.1};
}

// The acceptance model: V^c on both hidden layers, V^t on the output, loss on child 1
// for the labeled rows, penalties on the unlabeled ones.
PseudoEnsembleSpec semi_supervised_spec() {
  PseudoEnsembleSpec spec;
  spec.loss_on = "child";
  spec.penalties = {{"h1", "direction", 1.0, "unlabeled"},
                    {"h2", "direction", 1.0, "unlabeled"},
                    {"logits", "tanh", 2.0, "unlabeled"}};
  return spec;
}

int count_role(const Graph& g, const std::string& role) {
  int n = 0;
  for (NodeId v : g.nodes()) n += g[v].role == role;
  return n;
}

std::vector<double> labels(int64_t n, int64_t classes) {
  std::vector<double> y;
  for (int64_t i = 0; i < n; ++i) y.push_back(static_cast<double>((3 * i + 1) % classes));
  return y;
}

ParamStore<double> initialized(const Graph& g) {
  ParamStore<double> params(g);
  params.initialize(g, 3);
  return params;
}

// A training graph run forward on 4 rows, x = cos(0.3 i), its parameters drawn from seed
// 3 and its noise from key {1, 2}.
struct ForwardPass {
  ParamStore<double> params;
  Tape<double> tape;
  explicit ForwardPass(const Graph& g, bool grad_inputs = false)
      : params(initialized(g)), tape(g, params, {.batch = 4, .grad_inputs = grad_inputs}) {
    auto x = tape.input("x");
    for (int64_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.3 * static_cast<double>(i));
    tape.set_noise_key({1, 2});
    tape.forward();
  }
};

// One child carrying the loss, and an l2 penalty (λ 0.5) between the child's xhat and the
// parent's x: a decoder's reconstruction cost.
PseudoEnsembleSpec reconstruction_spec() {
  PseudoEnsembleSpec spec;
  spec.pairing = "parent-child";
  spec.children = 1;
  spec.loss_on = "child";
  PenaltyTerm term{.node = "xhat", .kind = "l2", .lambda = 0.5};
  term.target = "x";
  spec.penalties = {term};
  return spec;
}

}  // namespace

TEST_CASE("perturb: the parent is untouched, children share its parameters, taps are right") {
  const Graph parent = build_mlp(pea_mlp({784, 800, 800, 10}));
  const std::string before = to_text(parent);
  const PseudoEnsembleSpec spec = semi_supervised_spec();
  const PseudoEnsemble ensemble = build_pseudo_ensemble(parent, spec, {.labeled_rows = 64});
  const Graph& g = ensemble.graph;
  CHECK(to_text(parent) == before);
  CHECK(parent.size() == 15);
  verify(g, 128);

  // Parameters are shared: the same six nodes, read by both children.
  int params = 0;
  for (NodeId v : g.nodes()) {
    if (!is_param(g[v])) continue;
    ++params;
    std::set<std::string> readers;
    for (NodeId c : g.consumers(v)) readers.insert(g[c].role);
    CHECK(readers == std::set<std::string>{"child:1", "child:2"});
  }
  CHECK(params == 6);

  // Per child: copies of a1, h1, a2, h2, logits (5) and six noise ops (x: gaussian and
  // mask; a1, a2: gaussian; h1, h2: mask). The clean parent network is pruned: neither
  // the loss (on child 1) nor the child-child penalties read it.
  CHECK(count_role(g, "child:1") == 5 + 3);  // + the loss head: slice, xent, mean
  // Child 2 is read on the unlabeled rows alone: it computes those (graph/pass.h,
  // RestrictRows), from a slice of x.
  CHECK(count_role(g, "child:2") == 5 + 1);
  CHECK(g["x[rows 64..]"].role == "child:2");
  CHECK(count_role(g, "noise") == 12);
  CHECK(count_role(g, "parent") == 8);  // x, y and the six parameters
  CHECK_FALSE(g.find("h1").has_value());
  CHECK(g["c2/h1~mask"].op->name == "dropout");
  CHECK(g.inputs(g.at("c1/a2")) == std::vector<NodeId>{g.at("c1/h1~mask"), g.at("W2"), g.at("b2")});
  CHECK(g.nodes_with(kLoss).size() == 4);  // supervised loss + three penalties
  // The labels hold the labeled rows only.
  CHECK(infer_values(g, 128)[g.at("y")].shape == Shape{64});

  // What the passes report, so that nobody rebuilds node names: the taps, each term's
  // value and weight, the supervised loss and its head.
  const auto& taps = ensemble.penalties;
  REQUIRE(taps.size() == 3);
  CHECK(taps[0].layer == "h1");
  CHECK(taps[0].children == std::vector<std::string>{"c1/h1", "c2/h1"});
  CHECK(taps[0].parent.empty());
  CHECK(taps[2].layer == "out");
  CHECK(taps[2].term.kind == "tanh");
  CHECK(taps[2].term.lambda == 2.0);
  for (const PenaltyHandle& t : taps) {
    CHECK(g[t.value].has(kLoss));
    CHECK(g[t.lambda].op->name == "constant");
    CHECK(g.inputs(g.at(t.value))[0] == g.at(t.lambda));
  }
  CHECK(ensemble.losses == std::vector<std::string>{"loss/c1/loss"});
  CHECK(ensemble.loss_head.at("losses") == "loss/c1/losses");
  CHECK(g[ensemble.losses[0]].has(kLoss));
  // A tap is the child's value before its own noise: c1/h1 feeds the mask, not a2.
  CHECK(g.consumers(g.at("c1/h1")).size() == 2);  // its mask, and the penalty's row slice
}

TEST_CASE("perturb: a parent builds one graph; what its children draw follows the noise key") {
  const Graph parent = build_mlp(pea_mlp({6, 5, 4, 3}));
  const PseudoEnsembleSpec spec = semi_supervised_spec();
  const Graph a = build_pseudo_ensemble(parent, spec, {.labeled_rows = 2}).graph;
  const Graph b = build_pseudo_ensemble(parent, spec, {.labeled_rows = 2}).graph;
  CHECK(to_text(a) == to_text(b));
  const testing::Values v{{"x", std::vector<double>(30, 0.5)}, {"y", labels(2, 3)}};
  const auto logits = [&](const std::string& node, NoiseKey key) { return testing::evaluate(a, v, node, 5, key); };
  const NoiseKey key{3, 4};
  CHECK(logits("c1/logits", key) == testing::evaluate(b, v, "c1/logits", 5, key));  // replay
  CHECK(logits("c1/logits", key) != logits("c2/logits", key));                      // child
  CHECK(logits("c1/logits", key) != logits("c1/logits", {4, 4}));                   // seed
  CHECK(logits("c1/logits", key) != logits("c1/logits", {3, 5}));                   // step
  CHECK(logits("c1/logits", key) != logits("c1/logits", {3, 4, 1}));                // graph of the step
}

TEST_CASE("a centred MLP is the plain MLP on x - mean, and its children perturb x - mean") {
  MlpSpec centred = pea_mlp({6, 5, 4, 3});
  centred.input_mean = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
  const Graph a = build_mlp(centred);
  const Graph b = build_mlp(pea_mlp({6, 5, 4, 3}));
  CHECK_ERROR_MENTIONS(build_mlp({.layers = {6, 3}, .input_mean = {0.5}}), "1 values", "6 features");
  std::vector<double> x, shifted;
  for (int64_t r = 0; r < 5; ++r) {
    for (int64_t j = 0; j < 6; ++j) {
      x.push_back(0.1 * static_cast<double>((r * 7 + j * 3) % 11));
      shifted.push_back(x.back() - centred.input_mean[static_cast<size_t>(j)]);
    }
  }
  const testing::Values y{{"y", labels(5, 3)}};
  testing::Values va = y, vb = y;
  va["x"] = x;
  vb["x"] = shifted;
  CHECK(testing::evaluate(a, va, "logits", 5) == testing::evaluate(b, vb, "logits", 5));
  // The input noise sits on xc: a child masks and jitters x - mean, not x.
  CHECK(a["xc"].noise.size() == 2);
  CHECK(a["x"].noise.empty());
  const Graph ea = build_pseudo_ensemble(a, semi_supervised_spec(), {.labeled_rows = 2}).graph;
  CHECK(ea[ea.inputs(ea.at("c1/a1"))[0]].name == "c1/xc~mask");
  const auto noisy = testing::evaluate(ea, {{"x", x}, {"y", labels(2, 3)}}, "c1/xc~mask", 5, {3, 4});
  REQUIRE(noisy.size() == shifted.size());
  int masked = 0;
  for (size_t i = 0; i < noisy.size(); ++i) {
    if (noisy[i] == 0) {
      ++masked;
    } else {
      CHECK(std::abs(noisy[i] * 0.8 - shifted[i]) < 0.6);  // rescaled by 1/(1 - 0.2), N(0, 0.1²) added
    }
  }
  CHECK(masked > 0);
}

TEST_CASE("the combined objective's gradient, every penalty kind, both pairings, every noise kind") {
  MlpSpec m = pea_mlp({6, 5, 4, 3});
  Graph parent = build_mlp(m);
  add_noise(parent, parent.at("W2"), "fuzz", {{"sigma", 0.05}});
  // Subspace sampling over the first hidden layer's units: W1's columns, b1, W2's rows.
  add_noise(parent, parent.at("W1"), "subspace", {{"group", std::string("h1")}, {"keep", int64_t{3}}, {"axes", std::vector<int64_t>{1}}});
  add_noise(parent, parent.at("b1"), "subspace", {{"group", std::string("h1")}, {"keep", int64_t{3}}});
  add_noise(parent, parent.at("W2"), "subspace", {{"group", std::string("h1")}, {"keep", int64_t{3}}});
  for (const std::string pairing : {"child-child", "parent-child"}) {
    for (const PenaltyKind* penalty : PenaltyRegistry::global().all()) {
      const std::string& kind = penalty->name;
      if (kind.starts_with("test_")) continue;
      INFO(pairing << ", " << kind);
      PseudoEnsembleSpec spec;
      spec.pairing = pairing;
      spec.loss_on = pairing == "parent-child" ? "parent" : "child";
      // A companion term on h2 reads both children, so every noise node stays in the graph
      // for kinds that read one side only (target_entropy: the parent, or child 1).
      const std::string companion = kind == "l2" ? "softmax_l2" : "l2";
      spec.penalties = {{"h2", kind, 0.7, "unlabeled"}, {"logits", kind, 1.3, "all"}, {"h2", companion, 0.2, "all"}};
      const Graph g = build_pseudo_ensemble(parent, spec, {.labeled_rows = 2}).graph;
      CHECK(g.find("c1/subspace:h1").has_value());
      CHECK(g.find("c2/W2~fuzz").has_value());
      GradcheckOptions options;
      options.batch = 5;
      const GradcheckResult r = gradcheck(g, {{"y", labels(2, 3)}}, options);
      INFO(r.worst);
      CHECK(r.passed);
      CHECK(r.variables > 60);
    }
  }
}

TEST_CASE("a penalty with a fixed target moves the other side only") {
  const Graph parent = build_mlp(pea_mlp({6, 5, 4, 3}));
  for (const std::string pairing : {"parent-child", "child-child"}) {
    for (const bool fixed : {false, true}) {
      CAPTURE(pairing);
      CAPTURE(fixed);
      PseudoEnsembleSpec spec;
      spec.pairing = pairing;
      spec.loss_on = "child";
      spec.penalties = {{"logits", "xent", 1.0, "all", fixed}};
      const Graph g = build_pseudo_ensemble(parent, spec).graph;
      int stops = 0;
      for (NodeId v : g.nodes()) stops += g[v].op->name == "stop_gradient";
      CHECK(stops == (fixed ? 1 : 0));  // one target, shared by the pairs that read it
      ForwardPass run(g, /*grad_inputs=*/true);
      Tape<double>& tape = run.tape;
      // The penalty alone: d V / d (each side's logits).
      std::vector<double> seed{1.0};
      tape.backward_from("pen/logits/xent", seed);
      const std::string first = pairing == "parent-child" ? "logits" : "c1/logits";
      const auto moved = [&](const std::string& node) {
        const TensorView<const double> grad = tape.grad(node);
        return grad.data && grad.arr().abs().sum() > 0;
      };
      CHECK(moved(first) == !fixed);  // the target side: no gradient when fixed
      CHECK(moved("c2/logits"));       // the other side always
    }
  }
}

TEST_CASE("a penalty with a target: the child's node against another parent node; children compute what no output reads") {
  // A decoder no output reads: xhat = h1 · D, compared with the clean input x.
  Graph parent = build_mlp(pea_mlp({6, 5, 4, 3}));
  const NodeId d = parent.param("D", {5, 6}, {{"init", std::string("normal")}, {"std", 0.5}});
  parent.add("matmul", {parent.at("h1"), d}, {}, "xhat");
  PseudoEnsembleSpec spec = reconstruction_spec();
  const PseudoEnsemble pe = build_pseudo_ensemble(parent, spec);
  const Graph& g = pe.graph;
  CHECK(g.find("c1/xhat").has_value());
  CHECK_FALSE(g.find("xhat").has_value());  // the parent's decoder is read by nothing: pruned
  REQUIRE(pe.penalties.size() == 1);
  CHECK(pe.penalties[0].parent == "x");
  CHECK(pe.penalties[0].children == std::vector<std::string>{"c1/xhat"});

  ForwardPass run(g);
  const auto x = run.tape.value("x");
  // λ times the mean over rows of the squared distance between the clean x and the
  // child's reconstruction (which the child computes from its noisy h1).
  const auto xhat = run.tape.value("c1/xhat");
  REQUIRE(xhat.size() == 24);
  double sum = 0;
  for (int64_t i = 0; i < 24; ++i) sum += (x[i] - xhat[i]) * (x[i] - xhat[i]);
  CHECK(run.tape.value(pe.penalties[0].value)[0] == doctest::Approx(0.5 * sum / 4).epsilon(1e-12));

  GradcheckOptions options;
  options.batch = 4;
  const GradcheckResult r = gradcheck(g, {{"y", labels(4, 3)}}, options);
  INFO(r.worst);
  CHECK(r.passed);

  // What is wrong is named: the pairing, a missing target, a target of another shape.
  spec.pairing = "child-child";
  spec.children = 2;
  CHECK_ERROR_MENTIONS(spec.validate(), "penalties[0].target needs pairing 'parent-child'");
  spec.pairing = "parent-child";
  spec.children = 1;
  spec.penalties[0].target = "nowhere";
  CHECK_ERROR_MENTIONS(build_pseudo_ensemble(parent, spec), "penalty l2 on 'xhat'", "no node 'nowhere'");
  spec.penalties[0].target = "h2";
  CHECK_ERROR_MENTIONS(build_pseudo_ensemble(parent, spec), "the target 'h2' is [", "compares values of one shape");
  // Nodes that read the labels stay the loss head's: a penalty cannot make children compute them.
  spec.penalties[0] = {.node = "losses", .kind = "l2", .lambda = 1.0};
  CHECK_ERROR_MENTIONS(build_pseudo_ensemble(parent, spec), "penalty l2 on 'losses'", "or it is a loss");
}

TEST_CASE("a term's own pairing: denoising costs against the parent beside agreement between the children") {
  // Two children, each reconstructing the clean x (parent-child, the spec's pairing), and
  // an l2 term between the children's logits (child-child, the term's own).
  Graph parent = build_mlp(pea_mlp({6, 5, 4, 3}));
  const NodeId d = parent.param("D", {5, 6}, {{"init", std::string("normal")}, {"std", 0.5}});
  parent.add("matmul", {parent.at("h1"), d}, {}, "xhat");
  PseudoEnsembleSpec spec = reconstruction_spec();
  spec.children = 2;
  spec.loss_on = "children";
  spec.penalties.push_back({.node = "logits", .kind = "l2", .lambda = 0.25, .pairing = "child-child"});
  const PseudoEnsemble pe = build_pseudo_ensemble(parent, spec);
  REQUIRE(pe.penalties.size() == 2);
  CHECK(pe.penalties[0].pairing == "parent-child");
  CHECK(pe.penalties[0].parent == "x");
  CHECK(pe.penalties[1].pairing == "child-child");
  CHECK(pe.penalties[1].parent.empty());
  CHECK(pe.penalties[1].children == std::vector<std::string>{"c1/logits", "c2/logits"});

  ForwardPass run(pe.graph);
  const auto squared_distance = [&](const std::string& a, const std::string& b) {
    const auto va = run.tape.value(a), vb = run.tape.value(b);
    REQUIRE(va.size() == vb.size());
    double sum = 0;
    for (int64_t i = 0; i < va.size(); ++i) sum += (va[i] - vb[i]) * (va[i] - vb[i]);
    return sum;
  };
  // Each child's reconstruction against the clean x, averaged over the two children...
  const double denoising = (squared_distance("x", "c1/xhat") + squared_distance("x", "c2/xhat")) / 2;
  CHECK(run.tape.value(pe.penalties[0].value)[0] == doctest::Approx(0.5 * denoising / 4).epsilon(1e-12));
  // ...and the children's logits against each other, the parent's taking no part.
  CHECK(run.tape.value(pe.penalties[1].value)[0] ==
        doctest::Approx(0.25 * squared_distance("c1/logits", "c2/logits") / 4).epsilon(1e-12));

  GradcheckOptions options;
  options.batch = 4;
  const GradcheckResult r = gradcheck(pe.graph, {{"y", labels(4, 3)}}, options);
  INFO(r.worst);
  CHECK(r.passed);

  // What is wrong is named: an unknown pairing, child-child with one child, a target
  // on a term whose own pairing has no parent side.
  spec.penalties[1].pairing = "children";
  CHECK_ERROR_MENTIONS(spec.validate(), "penalties[1].pairing must be 'child-child' or 'parent-child'", "'children'");
  spec.penalties[1].pairing = "child-child";
  spec.children = 1;
  spec.loss_on = "child";
  CHECK_ERROR_MENTIONS(spec.validate(), "penalties[1].pairing 'child-child' needs at least 2 children, got 1");
  spec.children = 2;
  spec.penalties[0].pairing = "child-child";
  CHECK_ERROR_MENTIONS(spec.validate(), "penalties[0].target needs pairing 'parent-child'");
  // The spec's child-child pairing with one child is fine when every term pairs with the parent.
  spec.pairing = "child-child";
  spec.children = 1;
  spec.penalties = {spec.penalties[0]};
  spec.penalties[0].pairing = "parent-child";
  CHECK_NOTHROW(spec.validate());
}

TEST_CASE("children of two kinds: noise, terms and batch statistics on the children each lists") {
  // Child 1 is a ladder's: Gaussian noise on x and h1, the clean x reconstructed from its
  // h1, its own batch statistics. Child 2 is a consistency child: mask noise on x, KL to
  // the clean parent's logits, the parent's batch statistics held constant.
  Graph parent = build_mlp({.layers = {6, 5, 4, 3}, .weight_std = 0.7, .output_bias = 0.2, .batch_norm = true});
  add_noise(parent, parent.at("x"), "gaussian", {{"sigma", 0.2}}, {1});
  add_noise(parent, parent.at("h1"), "gaussian", {{"sigma", 0.2}}, {1});
  add_noise(parent, parent.at("x"), "mask", {{"p", 0.3}}, {2});
  const NodeId d = parent.param("D", {5, 6}, {{"init", std::string("normal")}, {"std", 0.5}});
  parent.add("matmul", {parent.at("h1"), d}, {}, "xhat");
  PseudoEnsembleSpec spec = reconstruction_spec();
  spec.children = 2;
  spec.penalties[0].children = {1};
  spec.penalties.push_back({.node = "logits", .kind = "kl", .lambda = 0.5, .fixed_target = true, .children = {2}});
  spec.batch_statistics = {"own", "parent"};
  CHECK(to_text(parent).find("gaussian(sigma=0.2)@1") != std::string::npos);

  const PseudoEnsemble pe = build_pseudo_ensemble(parent, spec);
  const Graph& g = pe.graph;
  CHECK(g.find("c1/x~gaussian"));
  CHECK(g.find("c1/h1~gaussian"));
  CHECK_FALSE(g.find("c1/x~mask"));
  CHECK(g.find("c2/x~mask"));
  CHECK_FALSE(g.find("c2/x~gaussian"));
  CHECK_FALSE(g.find("c2/h1~gaussian"));
  REQUIRE(pe.penalties.size() == 2);
  CHECK(pe.penalties[0].children == std::vector<std::string>{"c1/xhat"});
  CHECK(pe.penalties[1].children == std::vector<std::string>{"c2/logits"});
  CHECK_FALSE(g.find("c2/xhat"));  // nothing reads child 2's reconstruction: pruned
  // Child 1 normalises with its own batch's statistics, child 2 with the parent's.
  CHECK(g[g.inputs(g.at("c1/bn1"))[1]].name == "c1/bn1/mean");
  CHECK(g[g.inputs(g.at("c2/bn1"))[1]].name == "bn1/mean~parent");

  // Each term is its own child's alone: the reconstruction child 1's...
  ForwardPass run(g);
  const auto x = run.tape.value("x"), xhat = run.tape.value("c1/xhat");
  double squared = 0;
  for (int64_t i = 0; i < x.size(); ++i) squared += (x[i] - xhat[i]) * (x[i] - xhat[i]);
  CHECK(run.tape.value(pe.penalties[0].value)[0] == doctest::Approx(0.5 * squared / 4).epsilon(1e-12));
  // ...and the KL child 2's: the mean over rows of KL(smoothed parent || smoothed child 2).
  const auto p = run.tape.value("logits"), q = run.tape.value("c2/logits");
  const auto softmax = [&](const TensorView<const double>& z, int64_t r) {
    std::vector<double> e(3);
    double sum = 0;
    for (int64_t j = 0; j < 3; ++j) sum += e[static_cast<size_t>(j)] = std::exp(z[r * 3 + j]);
    for (double& v : e) v = (v / sum + spec.smoothing) / (1 + 3 * spec.smoothing);
    return e;
  };
  double kl = 0;
  for (int64_t r = 0; r < 4; ++r) {
    const std::vector<double> a = softmax(p, r), b = softmax(q, r);
    for (size_t j = 0; j < 3; ++j) kl += a[j] * std::log(a[j] / b[j]);
  }
  CHECK(run.tape.value(pe.penalties[1].value)[0] == doctest::Approx(0.5 * kl / 4).epsilon(1e-9));

  // Gradients, with both sides of every pair moving: finite differences move what a
  // fixed target or the parent's statistics hold constant (stop_gradient).
  PseudoEnsembleSpec moving = spec;
  moving.penalties[1].fixed_target = false;
  moving.batch_statistics = {"own"};
  GradcheckOptions options;
  options.batch = 4;
  const GradcheckResult r = gradcheck(build_pseudo_ensemble(parent, moving).graph, {{"y", labels(4, 3)}}, options);
  INFO(r.worst);
  CHECK(r.passed);

  // What is wrong is named.
  CHECK_ERROR_MENTIONS(add_noise(parent, parent.at("h2"), "mask", {{"p", 0.1}}, {0}), "node 'h2'",
                       "children numbered from 1, got 0");
  CHECK_ERROR_MENTIONS(add_noise(parent, parent.at("h2"), "mask", {{"p", 0.1}}, {2, 2}), "got 2 twice");
  // A kind may not take the key that lists an annotation's children for a parameter.
  if (!NoiseRegistry::global().find("test_children_param")) {
    NoiseRegistry::register_global({"test_children_param",
                                    "a kind whose parameter clashes with the annotation's children",
                                    {{"children", AttrType::Int, false, AttrValue(int64_t{1}), "clashes", {}}},
                                    false,
                                    [](NoiseSite& site, const Attributes&) { return site.value; }});
  }
  CHECK_ERROR_MENTIONS(add_noise(parent, parent.at("h2"), "test_children_param"), "declares a parameter 'children'");
  Graph three = parent;
  add_noise(three, three.at("h2"), "mask", {{"p", 0.1}}, {3});
  CHECK_ERROR_MENTIONS(build_pseudo_ensemble(three, spec), "node 'h2', noise 0 (mask)", "child 3",
                       "the pseudo-ensemble has 2");
  CHECK_ERROR_MENTIONS(build_inference(parent, 2), "node 'x'", "some children only", "samples 0");
  PseudoEnsembleSpec bad = spec;
  bad.penalties[1].children = {3};
  CHECK_ERROR_MENTIONS(bad.validate(), "penalties[1].children must list distinct children in [1, 2], got 3");
  bad.penalties[1].children = {2};
  bad.penalties[1].pairing = "child-child";
  CHECK_ERROR_MENTIONS(bad.validate(), "penalties[1].children: pairing 'child-child' needs at least 2 children");
  bad = spec;
  bad.batch_statistics = {"own", "parent", "own"};
  CHECK_ERROR_MENTIONS(bad.validate(), "batch_statistics must be one entry", "one per child (2), got 3");
}

TEST_CASE("parent_value: a child computes with the parent's value of a node, gradient included") {
  // The child's reconstruction is scaled by the parent's (clean) h1 mean, not its own noisy one.
  Graph parent = build_mlp(pea_mlp({6, 5, 4, 3}));
  const NodeId d = parent.param("D", {5, 6}, {{"init", std::string("normal")}, {"std", 0.5}});
  const NodeId mean = parent.add("mean", {parent.at("h1")}, {{"axes", std::vector<int64_t>{0}}}, "h1/mean");
  const NodeId clean = parent.add("parent_value", {mean}, {}, "h1/mean/clean");
  parent.add("mul", {parent.add("matmul", {parent.at("h1"), d}), parent.add("sum", {clean})}, {}, "xhat");
  PseudoEnsembleSpec spec = reconstruction_spec();
  const PseudoEnsemble pe = build_pseudo_ensemble(parent, spec);
  const Graph& g = pe.graph;
  CHECK_FALSE(g.find("c1/h1/mean/clean").has_value());  // no copy: the child reads the parent's node
  REQUIRE(g.find("h1/mean/clean").has_value());
  ForwardPass run(g);
  // xhat = (h1 · D) * sum(mean): the child's h1 is the matmul's first input, its noisy pass's.
  const NodeId child_product = g.inputs(g.at("c1/xhat"))[0];
  const NodeId scale = g.inputs(g.at("c1/xhat"))[1];
  REQUIRE(g[g.inputs(scale)[0]].name == "h1/mean/clean");
  const auto clean_mean = run.tape.value("h1/mean/clean");
  const auto h1 = run.tape.value("h1"), child_h1 = run.tape.value(g[g.inputs(child_product)[0]].name);
  REQUIRE(clean_mean.size() == 5);
  double differ = 0;
  for (int64_t j = 0; j < 5; ++j) {
    double m = 0, child_m = 0;
    for (int64_t i = 0; i < 4; ++i) {
      m += h1[i * 5 + j] / 4;
      child_m += child_h1[i * 5 + j] / 4;
    }
    CHECK(clean_mean[j] == doctest::Approx(m).epsilon(1e-12));
    differ += std::abs(child_m - m);
  }
  CHECK(differ > 1e-3);  // the child's own h1 is noisy: its mean would differ

  GradcheckOptions options;
  options.batch = 4;
  const GradcheckResult r = gradcheck(g, {{"y", labels(4, 3)}}, options);
  INFO(r.worst);
  CHECK(r.passed);

  // A parent_value only the loss reads is no network node: refused, named.
  Graph headed;
  const NodeId x = headed.input("x", {kBatch, 6});
  add_noise(headed, x, "gaussian", {{"sigma", 0.3}});
  const NodeId logits = headed.add("matmul", {x, headed.param("W", {6, 3})}, {}, "logits");
  headed.set_flag(logits, kOutput);
  const NodeId xent = headed.add("softmax_xent", {logits, headed.input("y", {kBatch}, DType::Index)}, {}, "losses");
  headed.set_flag(headed.add("mean", {headed.add("parent_value", {xent}, {}, "losses/clean")}, {}, "loss"), kLoss);
  PseudoEnsembleSpec on_child = reconstruction_spec();
  on_child.penalties.clear();
  CHECK_ERROR_MENTIONS(build_pseudo_ensemble(headed, on_child), "'losses/clean' (parent_value) is in the loss head");
}

TEST_CASE("activation_l2 is the mean square of both children's units, as the authors' lam_l2a") {
  PseudoEnsembleSpec spec;
  spec.loss_on = "children";
  spec.penalties = {{"h1", "activation_l2", 1.0, "all"}};
  const Graph g = build_pseudo_ensemble(build_mlp(pea_mlp({6, 5, 4, 3})), spec).graph;
  ForwardPass run(g);
  const auto h1 = run.tape.value("c1/h1"), h2 = run.tape.value("c2/h1");
  const double expected = (h1.arr().square().mean() + h2.arr().square().mean()) / 2;
  CHECK(expected > 0.01);
  CHECK(run.tape.value("pen/h1/activation_l2")[0] == doctest::Approx(expected).epsilon(1e-12));
}

TEST_CASE("target_entropy is the entropy of the parent's prediction in a parent-child pair, entropy the child's") {
  Graph parent = build_mlp(pea_mlp({6, 5, 4, 3}));
  PseudoEnsembleSpec spec;
  spec.children = 1;
  spec.pairing = "parent-child";
  spec.smoothing = 0;
  spec.penalties = {{"logits", "target_entropy", 1.0, "all"}, {"logits", "entropy", 1.0, "all"}};
  const Graph g = build_pseudo_ensemble(parent, spec).graph;
  ForwardPass run(g);
  const auto entropy = [](const auto& logits) {
    const Eigen::ArrayXXd z = logits.mat().template cast<double>().array();
    double total = 0;
    for (Eigen::Index r = 0; r < z.rows(); ++r) {
      const Eigen::ArrayXd e = (z.row(r) - z.row(r).maxCoeff()).exp().transpose();
      const Eigen::ArrayXd p = e / e.sum();
      total -= (p * p.log()).sum();
    }
    return total / static_cast<double>(z.rows());
  };
  const double of_parent = entropy(run.tape.value("logits")), of_child = entropy(run.tape.value("c1/logits"));
  CHECK(std::abs(of_parent - of_child) > 1e-3);  // the child's mask noise moves its prediction
  CHECK(run.tape.value("pen/logits/target_entropy")[0] == doctest::Approx(of_parent).epsilon(1e-10));
  CHECK(run.tape.value("pen/logits/entropy")[0] == doctest::Approx(of_child).epsilon(1e-10));
}

TEST_CASE("pseudo-labels: cross-entropy against the parent's confident argmax, rows under the threshold ignored") {
  const Graph parent = build_mlp(pea_mlp({6, 5, 4, 3}));
  std::vector<double> max_probs;
  const auto run = [&](double threshold) {
    max_probs.clear();
    PseudoEnsembleSpec spec;
    spec.pairing = "parent-child";
    spec.children = 1;
    spec.smoothing = 0;
    spec.penalties = {{"logits", "pseudo_label", 0.5, "all", false, {{"threshold", threshold}}}};
    const Graph g = build_pseudo_ensemble(parent, spec).graph;
    ParamStore<double> params(g);
    params.initialize(g, 3);
    Tape<double> tape(g, params, {.batch = 8, .grad_inputs = true});
    auto x = tape.input("x");
    for (int64_t i = 0; i < x.size(); ++i) x[i] = 2.0 * std::cos(0.7 * static_cast<double>(i));
    tape.set_noise_key({1, 2});
    tape.forward();
    std::vector<double> seed{1.0};
    tape.backward_from("pen/logits/pseudo_label", seed);
    const auto p = tape.value("logits").mat();
    const auto c = tape.value("c1/logits").mat();
    const auto dc = tape.grad("c1/logits").mat();
    double expected = 0;
    int confident = 0;
    for (int64_t r = 0; r < p.rows(); ++r) {
      Eigen::Index cls = 0;
      const double top = p.row(r).maxCoeff(&cls);
      const double max_prob = 1 / (p.row(r).array() - top).exp().sum();
      max_probs.push_back(max_prob);
      const double lse = std::log(c.row(r).array().exp().sum());
      CAPTURE(r);
      if (max_prob >= threshold) {
        ++confident;
        expected += lse - c(r, cls);
        CHECK(dc.row(r).cwiseAbs().sum() > 0);
      } else {
        CHECK(dc.row(r).cwiseAbs().sum() == 0);  // an ignored row gets no gradient
      }
    }
    CHECK(tape.value("pen/logits/pseudo_label")[0] == doctest::Approx(0.5 * expected / 8.0).epsilon(1e-12));
    const auto dp = tape.grad("logits");
    CHECK((!dp.data || dp.arr().abs().sum() == 0));  // the label is a target
    return confident;
  };
  CHECK(run(0.0) == 8);
  // A threshold between the batch's smallest and largest confidence splits its rows.
  std::sort(max_probs.begin(), max_probs.end());
  REQUIRE(max_probs[3] < max_probs[4]);
  CHECK(run((max_probs[3] + max_probs[4]) / 2) == 4);
  CHECK(run(1.0 + 1e-9) == 0);
}

TEST_CASE("a penalty parameter its kind does not declare is an error that names it") {
  PseudoEnsembleSpec spec;
  spec.pairing = "parent-child";
  spec.children = 1;
  spec.penalties = {{"logits", "kl", 1.0, "all", false, {{"threshold", 0.9}}}};
  CHECK_THROWS_WITH_AS(spec.validate(),
                       doctest::Contains("penalty kind 'kl' has no parameter 'threshold' (it takes none)"), Error);
  spec.penalties = {{"logits", "pseudo_label", 1.0, "all", false, {{"treshold", 0.9}}}};
  CHECK_THROWS_WITH_AS(spec.validate(), doctest::Contains("it takes threshold"), Error);
}

TEST_CASE("subspace sampling slices every parameter of a group with one draw per child") {
  Graph parent = build_mlp({.layers = {4, 6, 2}});
  add_noise(parent, parent.at("W1"), "subspace", {{"group", std::string("h")}, {"keep", int64_t{2}}, {"axes", std::vector<int64_t>{1}}});
  add_noise(parent, parent.at("b1"), "subspace", {{"group", std::string("h")}, {"keep", int64_t{2}}});
  add_noise(parent, parent.at("W2"), "subspace", {{"group", std::string("h")}, {"keep", int64_t{2}}});
  PseudoEnsembleSpec spec;
  spec.children = 1;
  spec.loss_on = "child";
  const Graph g = build_pseudo_ensemble(parent, spec).graph;
  const auto values = infer_values(g, 3);
  CHECK(values[g.at("c1/h1")].shape == Shape{3, 2});
  CHECK(g.consumers(g.at("c1/subspace:h")).size() == 3);
  // A group whose members disagree on the size is an error naming both.
  Graph bad = build_mlp({.layers = {4, 6, 2}});
  add_noise(bad, bad.at("W1"), "subspace", {{"group", std::string("h")}, {"keep", int64_t{2}}, {"axes", std::vector<int64_t>{1}}});
  add_noise(bad, bad.at("W2"), "subspace", {{"group", std::string("h")}, {"keep", int64_t{3}}});
  CHECK_ERROR_MENTIONS(build_pseudo_ensemble(bad, spec), "subspace group 'h'", "keeps 3 of 6", "2 of 6");
}

TEST_CASE("subset draws distinct sorted indices, replays from its key, and is uniform") {
  Graph g;
  g.add("subset", {}, {{"n", int64_t{10}}, {"keep", int64_t{4}}}, "pick");
  std::vector<int> hits(10, 0);
  for (uint64_t step = 0; step < 2000; ++step) {
    const auto idx = testing::evaluate(g, {}, "pick", 1, {5, step});
    REQUIRE(idx.size() == 4);
    for (size_t i = 0; i < idx.size(); ++i) {
      CHECK(idx[i] >= 0);
      CHECK(idx[i] < 10);
      if (i) CHECK(idx[i - 1] < idx[i]);
      hits[static_cast<size_t>(idx[i])]++;
    }
  }
  for (int h : hits) CHECK(h == doctest::Approx(800).epsilon(0.15));  // 2000 * 4 / 10
  CHECK(testing::evaluate(g, {}, "pick", 1, {5, 9}) == testing::evaluate(g, {}, "pick", 1, {5, 9}));
}

TEST_CASE("section 4.2: E KL(softmax(f(x)) || softmax(f(x; xi))) = E[A(f(x; xi)) - A(f(x))], exactly") {
  // Softmax regression on 6 inputs with inverted dropout (keep 0.7) on the input: all
  // 2^6 masks enumerated with their probabilities. The parent-child V^k penalty of pens
  // (no smoothing) gives the left side; log-sum-exp of the logits the right.
  const int d = 6, classes = 4;
  const double keep = 0.7;
  Graph g;
  const NodeId x = g.input("x", {1, d});
  const NodeId xm = g.input("x_masked", {1, d});
  const NodeId w = g.param("W", {d, classes});
  const NodeId b = g.param("b", {classes});
  const NodeId f = g.add("affine", {x, w, b}, {}, "f");
  const NodeId fm = g.add("affine", {xm, w, b}, {}, "f_masked");
  // A(z) = log Σ exp z.
  auto log_partition = [&](NodeId z, const std::string& name) {
    return g.add("log", {g.add("sum", {g.add("exp", {z})}, {{"axes", std::vector<int64_t>{-1}}})}, {}, name);
  };
  log_partition(f, "A");
  log_partition(fm, "A_masked");
  g.set_flag(f, kOutput);
  // The KL penalty nodes, from the penalty pass itself: a two-network "ensemble" whose
  // parent tap is f and whose child tap is f_masked.
  Perturbed with_child{g, {{{"f", "f_masked"}}}, {}, {}};
  PseudoEnsembleSpec spec;
  spec.children = 1;
  spec.pairing = "parent-child";
  spec.smoothing = 0;
  spec.penalties = {{"f", "kl", 1.0, "all"}};
  const std::vector<PenaltyHandle> handles = add_penalties(with_child, spec, {});
  REQUIRE(handles.size() == 1);
  CHECK(handles[0].children == std::vector<std::string>{"f_masked"});
  const Graph& kl = with_child.graph;

  std::vector<double> xs{0.8, -1.2, 0.3, 2.0, -0.5, 1.1}, ws(d * classes), bs{0.1, -0.2, 0.3, 0.0};
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = std::sin(1.7 * static_cast<double>(i) + 0.3);
  double lhs = 0, rhs = 0, total_probability = 0;
  for (int mask = 0; mask < (1 << d); ++mask) {
    std::vector<double> xm_values(d);
    double probability = 1;
    for (int j = 0; j < d; ++j) {
      const bool kept = (mask >> j) & 1;
      xm_values[static_cast<size_t>(j)] = kept ? xs[static_cast<size_t>(j)] / keep : 0.0;
      probability *= kept ? keep : 1 - keep;
    }
    const testing::Values v{{"x", xs}, {"x_masked", xm_values}, {"W", ws}, {"b", bs}};
    lhs += probability * testing::evaluate(kl, v, handles[0].value)[0];
    rhs += probability * (testing::evaluate(g, v, "A_masked")[0] - testing::evaluate(g, v, "A")[0]);
    total_probability += probability;
  }
  CHECK(total_probability == doctest::Approx(1.0).epsilon(1e-12));
  MESSAGE("E KL = " << std::setprecision(17) << lhs << ", E[A(f(x; xi)) - A(f(x))] = " << rhs
                    << ", difference " << std::abs(lhs - rhs));
  CHECK(lhs > 0.01);  // the identity is not 0 = 0
  CHECK(std::abs(lhs - rhs) < 1e-9);
}

TEST_CASE("lambda = 0 with the loss on a child reproduces plain dropout, loss and gradients") {
  const int64_t batch = 6;
  // The pseudo-ensemble: mask annotations, one child carrying the loss, penalties off.
  const Graph parent = build_mlp({.layers = {5, 7, 3}, .weight_std = 0.5, .mask_input = 0.2, .mask_hidden = 0.5});
  PseudoEnsembleSpec spec;
  spec.loss_on = "child";
  spec.penalties = {{"h1", "direction", 0.0, "all"}, {"logits", "kl", 0.0, "all"}};
  const Graph ensemble = build_pseudo_ensemble(parent, spec).graph;
  // Plain dropout: explicit dropout ops drawing the streams child 1 draws.
  Graph dropout = build_mlp({.layers = {5, 7, 3}, .input_dropout = 0.2, .hidden_dropout = 0.5, .weight_std = 0.5});
  dropout.node(dropout.at("drop1")).attrs.set("stream", ensemble["c1/x~mask"].attrs.get_int("stream"));
  dropout.node(dropout.at("drop2")).attrs.set("stream", ensemble["c1/h1~mask"].attrs.get_int("stream"));

  auto run = [&](const Graph& g, std::vector<float>* grads) {
    ParamStore<float> params(g);
    params.initialize(g, 4);
    // Bit for bit: unstacked, since the ensemble's parent (read by the λ = 0 penalties)
    // would share its products with the child, which changes the order of float sums
    // (stacking has tests of its own in tests/autodiff/test_stack.cpp).
    Tape<float> tape(g, params, {.batch = batch, .stack = false});
    auto x = tape.input("x");
    for (int64_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.3f * static_cast<float>(i));
    auto y = tape.input("y");
    for (int64_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 3);
    tape.set_noise_key({21, 5});
    tape.forward();
    tape.backward();
    for (const char* name : {"W1", "b1", "W2", "b2"}) {
      const auto gr = params.grad(name);
      grads->insert(grads->end(), gr.data, gr.data + gr.size());
    }
    return tape.objective();
  };
  std::vector<float> g_ensemble, g_dropout;
  const float loss_ensemble = run(ensemble, &g_ensemble);
  const float loss_dropout = run(dropout, &g_dropout);
  CHECK(loss_ensemble == loss_dropout);
  CHECK(g_ensemble == g_dropout);
  CHECK(std::any_of(g_dropout.begin(), g_dropout.end(), [](float v) { return v != 0.0f; }));
}

TEST_CASE("inference: the clean parent, or the Monte-Carlo mean over sampled children") {
  Graph parent = build_mlp(pea_mlp({6, 5, 4, 3}));
  const Graph clean = build_inference(parent);
  CHECK(count_role(clean, "noise") == 0);
  CHECK(clean.nodes_with(kLoss).empty());
  CHECK_FALSE(clean.find("y").has_value());  // no labels needed
  const Graph mc = build_inference(parent, 8);
  CHECK(mc.find("c8/logits").has_value());
  const testing::Values v{{"x", std::vector<double>(12, 0.3)}};
  const auto probs = testing::evaluate(mc, v, "mc/logits/probabilities", 2, {1, 1});
  REQUIRE(probs.size() == 6);
  CHECK(probs[0] + probs[1] + probs[2] == doctest::Approx(1.0));
  CHECK(probs[3] + probs[4] + probs[5] == doctest::Approx(1.0));
}

TEST_CASE("bad annotations and specs name what is wrong") {
  // (Kinds registered from outside pens: tests/examples/test_extending.cpp.)
  Graph parent = build_mlp({.layers = {4, 3, 2}});
  CHECK_ERROR_MENTIONS(add_noise(parent, parent.at("h1"), "blur"), "node 'h1'", "unknown noise kind 'blur'");
  CHECK_ERROR_MENTIONS(add_noise(parent, parent.at("h1"), "fuzz"), "node 'h1'", "parameters only");
  CHECK_ERROR_MENTIONS(add_noise(parent, parent.at("h1"), "mask", {{"q", 0.1}}), "node 'h1'", "noise mask",
                       "unknown attribute 'q'");

  PseudoEnsembleSpec bad;
  bad.pairing = "pairs";
  CHECK_ERROR_MENTIONS(bad.validate(), "pseudo_ensemble.pairing", "'pairs'");
  bad = {};
  bad.penalties = {{"h1", "hinge", 1.0, "all"}};
  CHECK_ERROR_MENTIONS(bad.validate(), "pseudo_ensemble.penalties[0].kind", "'hinge'", "registered", "direction, entropy, kl");
  bad.penalties = {{"h1", "kl", -1.0, "all"}};
  CHECK_ERROR_MENTIONS(bad.validate(), "penalties[0].lambda");
  bad.penalties = {{"nowhere", "kl", 1.0, "all"}};
  CHECK_ERROR_MENTIONS(build_pseudo_ensemble(parent, bad), "penalty kl on 'nowhere'", "no node 'nowhere' in the network the children compute");
  bad.penalties = {{"h1", "kl", 1.0, "unlabeled"}};
  CHECK_ERROR_MENTIONS(build_pseudo_ensemble(parent, bad), "rows 'unlabeled'", "labeled_rows");
  Graph no_output = parent;
  no_output.node(no_output.at("logits")).flags = 0;
  CHECK_ERROR_MENTIONS(build_pseudo_ensemble(no_output, {}), "marks no output node");
}

}  // namespace test_pseudo_ensemble
