// Defining a model as a graph and training it with pens, end to end.
//
// A 32-256-256-10 ReLU network with dropout (input 0.2, hidden 0.5: a pseudo-ensemble of
// dropout children, trained on eq. 1 of the paper) learns a synthetic teacher task.
// The noisy graph trains; a second graph without dropout nodes evaluates, reading the
// same parameters.
//
//   build/examples/mlp_synthetic [--epochs N] [--threads N]
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "autodiff/tape.h"
#include "graph/error.h"
#include "graph/printers.h"
#include "models/mlp.h"
#include "models/optimizer.h"
#include "models/synthetic.h"

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
  Eigen::setNbThreads(int_flag(argc, argv, "threads", 2));
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
  Sgd sgd(noisy, params);
  Tape<float> step(noisy, params, {.batch = batch});
  Tape<float> eval(clean, params, {.batch = test.size});

  std::printf("teacher task: %lld train / %lld test examples, %lld classes, %lld parameters\n",
              static_cast<long long>(train.size), static_cast<long long>(test.size),
              static_cast<long long>(train.classes), static_cast<long long>(params.numel()));
  std::printf("%5s  %10s  %10s  %9s  %8s\n", "epoch", "train loss", "test error", "ex/s", "time");
  const auto start = std::chrono::steady_clock::now();
  uint64_t n = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const auto epoch_start = std::chrono::steady_clock::now();
    double total = 0;
    int64_t steps = 0;
    for (int64_t first = 0; first + batch <= train.size; first += batch, ++n, ++steps) {
      copy_batch(train, first, step.input("x"), step.input("y"));
      step.set_noise_key({1, n});
      params.zero_grad();
      step.forward();
      step.backward();
      // Learning rate decays, momentum ramps up: a short version of the paper's schedule.
      sgd.step(0.1 * std::pow(0.95, epoch - 1), std::min(0.9, 0.5 + 0.05 * epoch));
      total += step.objective();
    }
    copy_batch(test, 0, eval.input("x"), eval.input("y"));
    eval.forward();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%5d  %10.4f  %9.2f%%  %9.0f  %7.1fs\n", epoch, total / static_cast<double>(steps),
                100.0 * error_rate(test, eval.value("logits")),
                static_cast<double>(steps * batch) / seconds, elapsed);
    std::fflush(stdout);
  }
  return 0;
} catch (const pens::Error& e) {
  std::cerr << "mlp_synthetic: error: " << e.what() << "\n";
  return 1;
}
