// Where pens stands before any tuning: the time of one training step of the paper's
// 784-800-800-10 network at batch 100 (forward + backward, and with the SGD update),
// with and without dropout, on 1 and 2 threads; and the cost of building and compiling
// a small graph (the per-sentence-tree case). Prints one JSON object per line.
//
//   build/bench/step_mlp [--reps N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/models/mlp.h"
#include "pens/ops/parallel.h"
#include "pens/train/loop/step.h"

using namespace pens;
using Clock = std::chrono::steady_clock;

namespace {
double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

// Median wall time of `reps` calls, in milliseconds, after `warmup` calls.
double time_ms(const std::function<void()>& f, int reps, int warmup) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return median(ms);
}

void bench_step(const char* mode, double input_p, double hidden_p, int threads, int reps) {
  set_threads(threads);
  const int64_t batch = 100;
  const Graph g = build_mlp({.layers = {784, 800, 800, 10},
                             .input_dropout = input_p,
                             .hidden_dropout = hidden_p,
                             .max_norm = 3.5});
  ParamStore<float> params(g);
  params.initialize(g, 1);
  const std::unique_ptr<Optimizer> sgd = make_optimizer("sgd", params);
  Step training_step(params, *sgd, model_constraints(g, params, MaxNormRule::UnitIncoming), /*seed=*/1);
  Tape<float> tape(g, params, {.batch = batch});
  auto x = tape.input("x");
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 256) / 255.0f;
  auto y = tape.input("y");
  for (int64_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 10);
  int64_t n = 0;
  // Forward and backward alone, then the whole training step (with the update and the
  // max-norm constraint).
  const double fwd_bwd = time_ms(
      [&] {
        tape.set_noise_key({1, static_cast<uint64_t>(n++)});
        params.zero_grad();
        tape.forward();
        tape.backward();
      },
      reps, 5);
  const double full = time_ms(
      [&] { training_step.run({.step = n++, .learning_rate = 0.1, .momentum = 0.5}, tape, [](Tape<float>&, size_t) {}); },
      reps, 5);
  // Matrix-product work of one step: three products forward, three weight gradients,
  // and input gradients for the two upper layers (the data needs none).
  const double flops = 2.0 * batch * (2 * 784.0 * 800 + 3 * 800.0 * 800 + 3 * 800.0 * 10);
  std::printf(
      "{\"bench\": \"step\", \"net\": \"784-800-800-10\", \"mode\": \"%s\", \"batch\": %lld, "
      "\"threads\": %d, \"forward_backward_ms\": %.3f, \"step_with_sgd_ms\": %.3f, "
      "\"examples_per_s\": %.0f, \"matmul_gflops\": %.1f}\n",
      mode, static_cast<long long>(batch), threads, fwd_bwd, full, batch / (full / 1000.0),
      flops / (fwd_bwd / 1000.0) / 1e9);
  std::fflush(stdout);
}

// A chain of 12 tanh(affine) layers of width 70: 50 nodes, about the size of the graph
// of one short sentence tree.
Graph chain_graph() {
  Graph g;
  NodeId h = g.input("x", {1, 70});
  for (int i = 0; i < 12; ++i) {
    const NodeId w = g.param("W" + std::to_string(i), {70, 70});
    const NodeId b = g.param("b" + std::to_string(i), {70});
    h = g.add("tanh", {g.add("affine", {h, w, b})});
  }
  g.set_flag(g.add("sum", {h}, {}, "loss"), kLoss);
  return g;
}

void bench_compile(int reps) {
  set_threads(1);
  const Graph proto = chain_graph();
  ParamStore<float> params(proto);
  const double build_ms = time_ms([&] { (void)chain_graph(); }, reps, 10);
  const double compile_ms = time_ms([&] { Tape<float> t(proto, params); }, reps, 10);
  Tape<float> tape(proto, params);
  const double run_ms = time_ms(
      [&] {
        tape.forward();
        tape.backward();
      },
      reps, 10);
  std::printf(
      "{\"bench\": \"small_graph\", \"nodes\": %zu, \"build_us\": %.1f, \"compile_us\": %.1f, "
      "\"forward_backward_us\": %.1f}\n",
      proto.size(), 1000 * build_ms, 1000 * compile_ms, 1000 * run_ms);
}
}  // namespace

int main(int argc, char** argv) {
  int reps = 30;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
  }
  bench_compile(10 * reps);
  for (int threads : {1, 2}) {
    bench_step("plain", 0.0, 0.0, threads, reps);
    bench_step("sde", 0.2, 0.5, threads, reps);
  }
  return 0;
}
