// Defining a model as a graph and training it with pens, end to end.
//
// A 32-256-256-10 ReLU network with dropout (input 0.2, hidden 0.5: a pseudo-ensemble of
// dropout children, trained on eq. 1 of the paper) learns a synthetic teacher task.
// The noisy graph trains; a second graph without dropout nodes evaluates, reading the
// same parameters.
//
//   build/examples/mlp_synthetic [--epochs N] [--threads N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "pens/autodiff/tape.h"
#include "pens/graph/printers.h"
#include "pens/models/mlp.h"
#include "pens/models/synthetic.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/train/loop/step.h"
#include "pens/train/optim/schedule.h"

using namespace pens;

namespace {
// The value of --name N, a positive integer, or `fallback` when the flag is absent.
int int_flag(int argc, char** argv, const std::string& name, int fallback) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i] != "--" + name) continue;
    char* end = nullptr;
    const long v = i + 1 < argc ? std::strtol(argv[i + 1], &end, 10) : 0;
    if (i + 1 >= argc || *end != '\0' || v < 1 || v > 100000) {
      fail("--", name, " needs a positive integer");
    }
    return static_cast<int>(v);
  }
  return fallback;
}
}  // namespace

int main(int argc, char** argv) try {
  const int epochs = int_flag(argc, argv, "epochs", 20);
  set_threads(int_flag(argc, argv, "threads", 2));
  const int64_t batch = 100;

  const Dataset train = make_teacher_task(20000, 32, 10, 1);
  const Dataset test = make_teacher_task(5000, 32, 10, 2);

  MlpSpec spec{.layers = {32, 256, 256, 10}, .input_dropout = 0.2, .hidden_dropout = 0.5,
               .weight_std = 0.05, .max_norm = 3.5};
  const Graph noisy = build_mlp(spec);
  spec.input_dropout = spec.hidden_dropout = 0.0;
  const Graph clean = build_mlp(spec);
  std::cout << "training graph:\n" << to_text(noisy, batch) << "\n";

  ParamStore<float> params(noisy);
  params.initialize(noisy, 1);
  const std::unique_ptr<Optimizer> sgd = make_optimizer("sgd", params);
  Step step(params, *sgd, model_constraints(noisy, params, MaxNormRule::UnitIncoming), /*seed=*/1);
  Tape<float> train_tape(noisy, params, {.batch = batch});
  Tape<float> eval(clean, params, {.batch = test.size});
  // A short version of the paper's schedule: the learning rate decays by 0.95 and the
  // momentum ramps from 0.5 to 0.9 over the first 8 epochs.
  const Schedule schedule{.learning_rate = 0.1, .decay = 0.95, .momentum_start = 0.5, .momentum_end = 0.9,
                          .momentum_epochs = 8};

  std::printf("teacher task: %lld train / %lld test examples, %lld classes, %lld parameters\n",
              static_cast<long long>(train.size), static_cast<long long>(test.size),
              static_cast<long long>(train.classes), static_cast<long long>(params.numel()));
  std::printf("%5s  %10s  %10s  %9s  %8s\n", "epoch", "train loss", "test error", "ex/s", "time");
  const auto start = std::chrono::steady_clock::now();
  const int64_t steps_per_epoch = train.size / batch;
  int64_t n = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const auto epoch_start = std::chrono::steady_clock::now();
    double total = 0;
    for (int64_t s = 0; s < steps_per_epoch; ++s, ++n) {
      const StepResult r = step.run(schedule.at(n, static_cast<double>(n) / static_cast<double>(steps_per_epoch)),
                                    train_tape, [&](Tape<float>& t, size_t) {
                                      copy_batch(train, s * batch, t.input("x"), t.input("y"));
                                    });
      if (!r.finite) fail("training diverged at step ", n, ": ", r.problem);
      total += r.objective;
    }
    copy_batch(test, 0, eval.input("x"), eval.input("y"));
    eval.forward();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%5d  %10.4f  %9.2f%%  %9.0f  %7.1fs\n", epoch, total / static_cast<double>(steps_per_epoch),
                100.0 * error_rate(test, eval.value("logits")),
                static_cast<double>(steps_per_epoch * batch) / seconds, elapsed);
    std::fflush(stdout);
  }
  return 0;
} catch (const pens::Error& e) {
  std::cerr << "mlp_synthetic: error: " << e.what() << "\n";
  return 1;
}
