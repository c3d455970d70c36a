// pens' side of bench/compare-torch.sh: one training step (forward, backward, SGD with
// momentum and max-norm) of the paper's 784-800-800-10 ReLU network in the three
// pseudo-ensemble modes the peer implements (bench/torch_peer.py):
//
//   sde     dropout (input 0.2, hidden 0.5), the loss on the one child
//   pea     supervised PEA (eq. 3): the loss on the clean parent, V^k against one
//           dropout child
//   pea-ss  semi-supervised PEA: B labeled + B unlabeled rows, two children with dropout
//           and Gaussian input and bias noise (σ 0.1), the loss on child 1's labeled
//           rows, V^c on both hidden layers and V^t on the output over unlabeled rows
//
// Prints one JSON object: {"side": "pens", "mode", "batch", "threads", "precision", "ms"
// (median step), "peak_rss_mb"}. With --dump DIR, also writes what the peer needs to recompute
// the objective of one step exactly: parameters, inputs, every noise site's input and
// output, and pens' objective (DIR/manifest.json, one float32 file per tensor).
//
//   build/bench/modes --mode pea-ss --batch 100 --threads 2 [--reps 30] [--dump DIR] [--stack 0]
//                     [--precision float32|float32-onednn|bfloat16]
//
// --stack 0 compiles the step's tape without stacked products (CompileOptions::stack), to
// measure what they buy; --precision runs the products on oneDNN in float32 or bfloat16
// (ops/precision.h).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/mlp.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/train/loop/step.h"

using namespace pens;
using Clock = std::chrono::steady_clock;

namespace {

struct Mode {
  Graph graph;
  PseudoEnsembleSpec spec;
  EnsembleOptions options;
  int64_t rows = 0;  // batch rows fed per step
};

Mode make_mode(const std::string& name, int64_t batch) {
  Mode m;
  // Weights of std 0.05 give logits far enough from 0 that the --dump check means something.
  MlpSpec net{.layers = {784, 800, 800, 10}, .weight_std = 0.05, .max_norm = 3.5, .mask_input = 0.2, .mask_hidden = 0.5};
  m.rows = batch;
  if (name == "sde") {
    m.spec.children = 1;
    m.spec.loss_on = "child";
  } else if (name == "pea") {
    m.spec.children = 1;
    m.spec.pairing = "parent-child";
    m.spec.loss_on = "parent";
    m.spec.penalties = {{"logits", "kl", 1.0, "all"}};
  } else if (name == "pea-ss") {
    net.gaussian_input = net.gaussian_bias = 0.1;
    m.spec.children = 2;
    m.spec.loss_on = "child";
    m.spec.penalties = {{"h1", "direction", 1.0, "unlabeled"},
                        {"h2", "direction", 1.0, "unlabeled"},
                        {"logits", "tanh", 1.0, "unlabeled"}};
    m.options.labeled_rows = batch;
    m.rows = 2 * batch;
  } else {
    fail("--mode must be sde, pea or pea-ss, got '", name, "'");
  }
  m.graph = build_mlp(net);
  return m;
}

// Inputs the peer can reproduce: pixels in [0, 1] with many exact zeros (as MNIST's),
// labels cycling through the classes.
void fill_inputs(Tape<float>& tape, int64_t labeled) {
  auto x = tape.input("x");
  for (int64_t i = 0; i < x.size(); ++i) {
    const int64_t v = (i * 7919) % 401;
    x[i] = v < 200 ? 0.0f : static_cast<float>(v - 200) / 200.0f;
  }
  auto y = tape.input("y");
  for (int64_t i = 0; i < y.size() && i < labeled; ++i) y[i] = static_cast<float>(i % 10);
}

void write_tensor(const std::filesystem::path& dir, nlohmann::json& manifest, const std::string& name,
                  TensorView<const float> t) {
  const std::string file = "t" + std::to_string(manifest["tensors"].size()) + ".bin";
  std::ofstream out(dir / file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(t.data), static_cast<std::streamsize>(t.size() * sizeof(float)));
  if (!out) fail((dir / file).string(), ": cannot write");
  std::vector<int64_t> shape;
  for (int i = 0; i < t.shape.rank; ++i) shape.push_back(t.shape[i]);
  manifest["tensors"][name] = {{"file", file}, {"shape", shape}};
}

// One step's objective, with everything needed to recompute it: parameters before the
// step, inputs, and for every noise node its op, input and output.
void dump(const std::filesystem::path& dir, const std::string& mode, int64_t batch, const Graph& training,
          Tape<float>& tape, const ParamStore<float>& params) {
  std::filesystem::create_directories(dir);
  nlohmann::json manifest = {{"mode", mode}, {"batch", batch}, {"tensors", nlohmann::json::object()}, {"noise", nlohmann::json::array()}};
  for (const ParamEntry& e : params.entries()) write_tensor(dir, manifest, e.name, params.value(e));
  tape.set_noise_key({7, 3});
  tape.forward();
  manifest["objective"] = static_cast<double>(tape.objective());
  write_tensor(dir, manifest, "x", tape.value("x"));
  write_tensor(dir, manifest, "y", tape.value("y"));
  for (NodeId v : training.nodes()) {
    const Node& n = training[v];
    if (n.role != "noise") continue;
    const std::string& input = training[training.inputs(v)[0]].name;
    write_tensor(dir, manifest, n.name + "/in", tape.value(input));
    write_tensor(dir, manifest, n.name + "/out", tape.value(n.name));
    manifest["noise"].push_back({{"node", n.name}, {"op", n.op->name}});
  }
  std::ofstream(dir / "manifest.json") << manifest.dump(1) << "\n";
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string mode = "sde", dump_dir;
    int64_t batch = 100;
    int threads = 2, reps = 30;
    bool stack = true;
    Precision precision = Precision::Float32;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string key = argv[i], value = argv[i + 1];
      if (key == "--mode") mode = value;
      else if (key == "--batch") batch = std::stoll(value);
      else if (key == "--threads") threads = std::stoi(value);
      else if (key == "--reps") reps = std::max(1, std::stoi(value));
      else if (key == "--dump") dump_dir = value;
      else if (key == "--stack") stack = value != "0";
      else if (key == "--precision") precision = parse_precision(value, "--precision");
      else fail("unknown option ", key, " (--mode --batch --threads --reps --dump --stack --precision)");
    }
    set_threads(threads);
    const Mode m = make_mode(mode, batch);
    const Graph training = build_pseudo_ensemble(m.graph, m.spec, m.options).graph;
    ParamStore<float> params(m.graph);
    params.initialize(m.graph, 1);
    const std::unique_ptr<Optimizer> sgd = make_optimizer("sgd", params);
    Step training_step(params, *sgd, model_constraints(m.graph, params, MaxNormRule::UnitIncoming), /*seed=*/1);
    Tape<float> tape(training, params, {.batch = m.rows, .stack = stack, .precision = precision});
    fill_inputs(tape, batch);
    if (!dump_dir.empty()) dump(dump_dir, mode, batch, training, tape, params);

    // The inputs stay as fill_inputs wrote them: the step times the computation alone.
    const auto step = [&](int64_t n) {
      training_step.run({.step = n, .learning_rate = 0.01, .momentum = 0.5}, tape, [](Tape<float>&, size_t) {});
    };
    int64_t n = 0;
    for (int i = 0; i < 5; ++i) step(n++);
    std::vector<double> ms;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = Clock::now();
      step(n++);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::printf("{\"side\": \"pens\", \"mode\": \"%s\", \"batch\": %lld, \"threads\": %d, \"precision\": \"%s\", "
                "\"ms\": %.3f, \"peak_rss_mb\": %.1f}\n",
                mode.c_str(), static_cast<long long>(batch), threads, precision_name(precision), median(ms),
                static_cast<double>(usage.ru_maxrss) / 1024.0);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "modes: %s\n", e.what());
    return 1;
  }
}
