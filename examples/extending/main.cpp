// Extending pens from outside: an op (softplus), two noise kinds (multiplicative, and
// sign_adversarial, found from gradients), a penalty kind (cosine) and an optimizer
// (RMSprop), each defined in one header of this folder and registered with one line
// below; then a pseudo-ensemble that uses all five learns a synthetic task through pens'
// own training step.
//
//   build/examples/extending [--epochs N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "examples/extending/cosine_penalty.h"
#include "examples/extending/multiplicative_noise.h"
#include "examples/extending/rmsprop_optimizer.h"
#include "examples/extending/sign_adversarial_noise.h"
#include "examples/extending/softplus_op.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/synthetic.h"
#include "pens/ops/registry.h"
#include "pens/train/loop/step.h"
#include "pens/train/optim/schedule.h"
#include "pens/train/tasks/evaluation.h"

using namespace pens;

int main(int argc, char** argv) try {
  int epochs = 8;
  if (argc == 3 && std::strcmp(argv[1], "--epochs") == 0) epochs = std::max(1, std::atoi(argv[2]));

  // The five registration lines.
  OpRegistry::register_global<Softplus>();
  NoiseRegistry::register_global(multiplicative_noise());
  NoiseRegistry::register_global(sign_adversarial_noise());
  PenaltyRegistry::register_global(cosine_penalty());
  OptimizerRegistry::register_global(rmsprop_optimizer());

  // A 16-32-4 network with a softplus hidden layer that children perturb multiplicatively,
  // on inputs that children see moved by a sign-gradient step.
  Graph g;
  const NodeId x = g.input("x", {kBatch, 16});
  add_noise(g, x, "sign_adversarial", {{"eps", 0.05}});
  const NodeId y = g.input("y", {kBatch}, DType::Index);
  const Attributes init{{"init", std::string("normal")}, {"std", 0.3}};
  const NodeId a1 = g.add("affine", {x, g.param("W1", {16, 32}, init), g.param("b1", {32})}, {}, "a1");
  const NodeId h1 = g.add("softplus", {a1}, {}, "h1");
  add_noise(g, h1, "multiplicative", {{"sigma", 0.5}});
  const NodeId logits = g.add("affine", {h1, g.param("W2", {32, 4}, init), g.param("b2", {4})}, {}, "logits");
  g.set_flag(logits, kOutput);
  g.set_flag(g.add("mean", {g.add("softmax_xent", {logits, y})}, {}, "loss"), kLoss);

  // Two children carry the loss; the cosine penalty pulls their hidden layers together.
  PseudoEnsembleSpec spec;
  spec.loss_on = "children";
  spec.penalties = {{"h1", "cosine", 0.5, "all"}};
  const PseudoEnsemble ensemble = build_pseudo_ensemble(g, spec);

  const Dataset train = make_teacher_task(4000, 16, 4, 1);
  const Dataset test = make_teacher_task(1000, 16, 4, 2);
  ParamStore<float> params(g);
  params.initialize(g, 1);
  const auto rmsprop = make_optimizer("rmsprop", params);
  Step step(params, *rmsprop, {}, /*seed=*/1);
  const int64_t batch = 50, steps_per_epoch = train.size / batch;
  Tape<float> tape(ensemble.graph, params, {.batch = batch});
  const Graph inference = build_inference(g);
  const ClassifierIo io = classifier_io(inference, "the extended network", false);
  Tape<float> eval(inference, params, {.batch = 500});
  const Schedule schedule{.learning_rate = 0.003};

  std::printf("%5s  %10s  %10s\n", "epoch", "objective", "test error");
  int64_t n = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    double total = 0;
    for (int64_t s = 0; s < steps_per_epoch; ++s, ++n) {
      const StepResult r = step.run(schedule.at(n, 0), tape, [&](Tape<float>& t, size_t) {
        copy_batch(train, s * batch, t.input("x"), t.input("y"));
      });
      if (!r.finite) fail("training diverged at step ", n, ": ", r.problem);
      total += r.objective;
    }
    std::printf("%5d  %10.4f  %9.2f%%\n", epoch, total / static_cast<double>(steps_per_epoch),
                100.0 * classification_error(eval, io, test));
  }
  return 0;
} catch (const pens::Error& e) {
  std::cerr << "extending: error: " << e.what() << "\n";
  return 1;
}
