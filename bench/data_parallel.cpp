// The data-parallel step of bench/distributed.sh: the training step of a model file's
// pseudo-ensemble (default examples/mnist/pea-xent.model.json, the network of
// examples/mnist/pea-600.json) on a global batch of L labeled + U unlabeled rows,
// shared out among the processes mpirun started (or one process without mpirun).
//
// Process 0 prints one JSON object: {"processes", "threads", "labeled", "unlabeled",
// "overlap", "ms" (median step), "allreduce_ms" (median blocking sum of every parameter
// gradient alone, 0 for one process), "gradient_floats"}. --no-overlap sums the gradients
// after the backward pass instead of as each is finished.
//
//   mpirun -np 2 build/bench/data_parallel --threads 1 --labeled 64 --unlabeled 64
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/serialization/model_file.h"
#include "pens/train/dist/mpi_communicator.h"
#include "pens/train/loop/step.h"

using namespace pens;
using Clock = std::chrono::steady_clock;

namespace {

// Forwards to a communicator but starts every sum when the backward pass is over: the
// step without overlap, to measure what overlap buys.
class AfterBackward : public Communicator {
 public:
  explicit AfterBackward(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void sum(std::span<double> values) override { inner_.sum(values); }
  void start_sum(std::span<float> values) override { held_.push_back(values); }
  void progress() override {}
  void finish_sums() override {
    for (std::span<float> v : held_) inner_.start_sum(v);
    held_.clear();
    inner_.finish_sums();
  }
  void gather(std::span<const float> mine, std::span<float> all) override { inner_.gather(mine, all); }
  uint64_t broadcast(uint64_t value) override { return inner_.broadcast(value); }
  std::string first_problem(const std::string& problem) override { return inner_.first_problem(problem); }

 private:
  Communicator& inner_;
  std::vector<std::span<float>> held_;
};

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::unique_ptr<Communicator> world = mpi_world();
  try {
    std::string model_path = "examples/mnist/pea-xent.model.json";
    int64_t labeled = 64, unlabeled = 64;
    int threads = 1, reps = 40;
    bool overlap = true;
    for (int i = 1; i < argc; ++i) {
      const std::string key = argv[i];
      if (key == "--no-overlap") {
        overlap = false;
        continue;
      }
      if (i + 1 >= argc) fail("option ", key, " needs a value");
      const std::string value = argv[++i];
      if (key == "--model") model_path = value;
      else if (key == "--labeled") labeled = std::stoll(value);
      else if (key == "--unlabeled") unlabeled = std::stoll(value);
      else if (key == "--threads") threads = std::stoi(value);
      else if (key == "--reps") reps = std::max(1, std::stoi(value));
      else fail("unknown option ", key, " (--model --labeled --unlabeled --threads --reps --no-overlap)");
    }
    set_threads(threads);
    const int rank = world ? world->rank() : 0, processes = world ? world->size() : 1;
    if (labeled % processes != 0 || unlabeled % processes != 0) fail("the batch must divide among the processes");
    const int64_t local_labeled = labeled / processes, local_unlabeled = unlabeled / processes;

    const Model model = load_model(model_path);
    if (!model.ensemble) fail(model_path, ": no pseudo_ensemble section");
    const Graph training =
        build_pseudo_ensemble(model.graph, *model.ensemble, {.labeled_rows = local_labeled}).graph;
    ParamStore<float> params(model.graph);
    params.initialize(model.graph, 1);
    const std::unique_ptr<Optimizer> sgd = make_optimizer("sgd", params);
    Step step(params, *sgd, model_constraints(model.graph, params, MaxNormRule::UnitIncoming), /*seed=*/1);
    Tape<float> tape(training, params, {.batch = local_labeled + local_unlabeled});
    std::unique_ptr<AfterBackward> deferred;
    if (world && processes > 1) {
      tape.set_row_placement({{.local = 0, .global = rank * local_labeled, .count = local_labeled},
                              {.local = local_labeled, .global = labeled + rank * local_unlabeled, .count = local_unlabeled}});
      if (!overlap) deferred = std::make_unique<AfterBackward>(*world);
      step.set_communicator(overlap ? world.get() : deferred.get());
    }
    // Pixels in [0, 1] and labels cycling through the classes; fixed, so that the step
    // times the computation alone.
    auto x = tape.input("x");
    for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 401) / 400.0f;
    auto y = tape.input("y");
    for (int64_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 10);

    const auto run = [&](int64_t n) {
      step.run({.step = n, .learning_rate = 0.01, .momentum = 0.5}, tape, [](Tape<float>&, size_t) {});
    };
    int64_t n = 0;
    for (int i = 0; i < 5; ++i) run(n++);
    std::vector<double> ms, allreduce_ms;
    for (int i = 0; i < reps; ++i) {
      if (world) world->broadcast(0);  // start together
      const auto t0 = Clock::now();
      run(n++);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    if (world && processes > 1) {
      for (int i = 0; i < reps; ++i) {
        world->broadcast(0);
        const auto t0 = Clock::now();
        for (const ParamEntry& e : params.entries()) {
          const TensorView<float> g = params.grad(e);
          world->start_sum({g.data, static_cast<size_t>(g.size())});
        }
        world->finish_sums();
        allreduce_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
    }
    if (rank == 0) {
      std::printf("{\"processes\": %d, \"threads\": %d, \"labeled\": %lld, \"unlabeled\": %lld, \"overlap\": %s, "
                  "\"ms\": %.3f, \"allreduce_ms\": %.3f, \"gradient_floats\": %lld}\n",
                  processes, threads, static_cast<long long>(labeled), static_cast<long long>(unlabeled),
                  overlap ? "true" : "false", median(ms), allreduce_ms.empty() ? 0.0 : median(allreduce_ms),
                  static_cast<long long>(params.numel()));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "data_parallel: %s\n", e.what());
    if (world && world->size() > 1) mpi_abort(1);
    return 1;
  }
}
