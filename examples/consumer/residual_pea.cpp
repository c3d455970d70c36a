// A new architecture declared with pens from a project of its own: a residual network
// (x -> h1 -> h1 + relu(affine(h1)) -> logits) with Gaussian noise on the input and a
// mask on the residual branch, made a pseudo-ensemble with V^k penalties on the hidden
// layer and the output. The program writes the model file, reads it back, builds the
// pseudo-ensemble's training graph and trains it for a few steps on a synthetic task.
//
//   residual_pea MODEL.json [STEPS]
#include <pens/autodiff/tape.h>
#include <pens/graph/noise.h>
#include <pens/graph/pseudo_ensemble.h>
#include <pens/models/synthetic.h>
#include <pens/ops/ir/error.h>
#include <pens/serialization/model_file.h>
#include <pens/train/loop/step.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

namespace {

pens::Model residual_model(int64_t in, int64_t width, int64_t classes) {
  using pens::Attributes;
  pens::Graph g;
  const pens::NodeId x = g.input("x", {pens::kBatch, in});
  g.node(x).layer = "in";
  add_noise(g, x, "gaussian", {{"sigma", 0.1}});
  const pens::NodeId y = g.input("y", {pens::kBatch}, pens::DType::Index);
  const Attributes weights{{"init", std::string("normal")}, {"std", 0.1}};
  const Attributes zeros{{"init", std::string("constant")}, {"value", 0.0}};

  pens::NodeId h1 = g.add("affine", {x, g.param("W1", {in, width}, weights), g.param("b1", {width}, zeros)});
  h1 = g.add("tanh", {h1}, {}, "h1");
  pens::NodeId branch = g.add("affine", {h1, g.param("W2", {width, width}, weights), g.param("b2", {width}, zeros)});
  branch = g.add("relu", {branch}, {}, "branch");
  add_noise(g, branch, "mask", {{"p", 0.3}});
  const pens::NodeId h2 = g.add("add", {h1, branch}, {}, "h2");
  const pens::NodeId logits =
      g.add("affine", {h2, g.param("W3", {width, classes}, weights), g.param("b3", {classes}, zeros)}, {}, "logits");
  for (pens::NodeId v : {h1, branch, h2}) g.node(v).layer = "hidden";
  g.node(logits).layer = "out";
  g.set_flag(logits, pens::kOutput);
  const pens::NodeId loss = g.add("mean", {g.add("softmax_xent", {logits, y})}, {}, "loss");
  g.set_flag(loss, pens::kLoss);

  pens::Model model;
  model.graph = std::move(g);
  pens::PseudoEnsembleSpec spec;
  spec.children = 2;
  spec.penalties = {{.node = "h2", .kind = "l2", .lambda = 0.1}, {.node = "logits", .kind = "kl", .lambda = 1.0}};
  model.ensemble = spec;
  model.metadata["description"] = "a residual pseudo-ensemble declared by examples/consumer";
  return model;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: residual_pea MODEL.json [STEPS]\n");
    return 2;
  }
  const std::string path = argv[1];
  const int steps = argc == 3 ? std::atoi(argv[2]) : 200;
  if (steps < 1) pens::fail("STEPS must be a positive integer, got '", argv[2], "'");

  pens::save_model(residual_model(16, 64, 4), path);
  const pens::Model model = pens::load_model(path);  // what was written reads back
  const pens::PseudoEnsemble ensemble = pens::build_pseudo_ensemble(model.graph, *model.ensemble);
  std::printf("wrote %s: %zu nodes; pseudo-ensemble of %lld children, %zu nodes, %zu penalties\n", path.c_str(),
              model.graph.size(), static_cast<long long>(ensemble.spec.children), ensemble.graph.size(),
              ensemble.penalties.size());

  const int64_t batch = 32;
  const pens::Dataset data = pens::make_teacher_task(batch * 50, 16, 4, /*seed=*/1);
  pens::ParamStore<float> params(ensemble.graph);
  params.initialize(ensemble.graph, /*seed=*/1);
  pens::Tape<float> tape(ensemble.graph, params, {.batch = batch});
  const auto sgd = pens::make_optimizer("sgd", params);
  pens::Step step(params, *sgd, {}, /*seed=*/1);
  std::vector<double> objective;
  for (int n = 0; n < steps; ++n) {
    const int64_t start = (n * batch) % data.size;
    const pens::StepResult r =
        step.run({.step = n, .learning_rate = 0.05, .momentum = 0.9}, tape, [&](pens::Tape<float>& t, size_t) {
          pens::copy_batch(data, start, t.input("x"), t.input("y"));
        });
    if (!r.finite) pens::fail("step ", n, " diverged: ", r.problem);
    objective.push_back(r.objective);
  }
  // Means over the first and the last tenth of the steps: the training must have lowered it.
  const size_t tenth = std::max<size_t>(1, objective.size() / 10);
  const double first = std::accumulate(objective.begin(), objective.begin() + tenth, 0.0) / tenth;
  const double last = std::accumulate(objective.end() - tenth, objective.end(), 0.0) / tenth;
  std::printf("objective: %.4f over the first %zu steps, %.4f over the last %zu of %d\n", first, tenth, last, tenth,
              steps);
  return last < first ? 0 : 1;
} catch (const pens::Error& e) {
  std::fprintf(stderr, "residual_pea: %s\n", e.what());
  return 1;
}
