// Tree throughput: the compact tensor network on SST training trees, one step of
// `batch` trees at a time in `groups` groups on the threads, as the trainer runs them
// (TreeStepGraphs; AdaGrad with the paper's ℓ2), and evaluation (the clean parent's
// forward pass, on forests of `eval-forest` trees). Prints one JSON object:
//   "train_nodes_per_s" (the steps, compiling the TreeTapes of level widths as they meet
//   them), "train_again_nodes_per_s" (the same steps again, their tapes compiled, as a
//   run's steps after its first epoch mostly find them), "eval_nodes_per_s" (an
//   evaluation that finds its tapes compiled, as a run's after its first),
//   "eval_first_nodes_per_s" (the first, compiling them);
//   "eval_flop_per_node": the clean forward pass's useful work per evaluated node;
//   "train_flop_per_node": three times the forward pass's per trained node (each product
//   runs forward, for the input gradients and for the weight gradients; it counts every
//   product at full width, so it holds for CTN and CTN+F, not for the sliced models);
//   "eval_gflops": that work's rate; "bilinear_gflops": the bilinear op's forward alone
//   on one thread, the faster of 64 and 256 rows, the most a level's products reach;
//   and "side", "model", "dim", "threads", "groups", "eval_forest", "precision" (of the
//   products: --precision float32-onednn runs them on oneDNN), "steps", "nodes".
// With --dump DIR, also writes the parameters (one float32 file each), the first step's
// trees (their lines in train.txt) with their leaves' vocabulary ids, and pens' objective
// on them, for bench/torch_trees.py to check that it computes the same function.
//
//   build/bench/trees --data ../shared/data/sst [--model ctn|ctn+s|ctn+f|ctn+f+s] [--dim 70]
//                     [--steps 20] [--batch 27] [--groups 4] [--eval-forest 64] [--threads 1]
//                     [--precision float32|float32-onednn] [--dump DIR]
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "pens/models/ctn.h"
#include "pens/models/dataset.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/train/loop/step.h"
#include "pens/train/optim/optimizer.h"
#include "pens/train/tasks/tree_model.h"
#include "pens/train/tasks/tree_trainer.h"

using namespace pens;
using Clock = std::chrono::steady_clock;

namespace {

const std::map<std::string, double> kL2 = {{"T", 4e-3}, {"Ml", 4e-3}, {"Mr", 4e-3}, {"m", 4e-3},
                                           {"C", 2e-4}, {"c", 2e-4}, {"E", 2e-4}};

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Useful floating-point work of the CTN's clean forward pass over a tree: per internal
// node the bilinear form (2n³) and M's two blocks (4n²), per node the scores (2n·classes).
// Training does each product three times (forward, input gradients, weight gradients).
double forward_flop(const SentimentTree& t, int64_t n, int64_t classes) {
  const int64_t internal = t.size() - (t.size() + 1) / 2;
  return static_cast<double>(internal) * (2.0 * n * n * n + 4.0 * n * n) + static_cast<double>(t.size()) * 2.0 * n * classes;
}

// The bilinear op's forward rate (GFLOP/s, on the calling thread) at `rows` rows: the
// kernel a wide level runs, measured alone.
double bilinear_gflops(int64_t n, int64_t rows, Precision precision) {
  Graph g;
  const NodeId v1 = g.input("v1", {rows, n});
  const NodeId v2 = g.input("v2", {rows, n});
  g.set_flag(g.add("bilinear", {v1, g.param("T", {n, n, n}), v2}, {}, "y"), kOutput);
  ParamStore<float> params(g);
  params.initialize(g, 1);
  Tape<float> tape(g, params, CompileOptions{.precision = precision});
  for (const char* name : {"v1", "v2"}) {
    const TensorView<float> v = tape.input(name);
    for (int64_t i = 0; i < v.size(); ++i) v.data[i] = static_cast<float>((i % 13) - 6) / 13.0f;
  }
  tape.forward();  // warm
  int64_t reps = 0;
  const Clock::time_point t0 = Clock::now();
  while (reps < 5 || seconds(t0) < 0.5) tape.forward(), ++reps;
  return 2.0 * static_cast<double>(n * n * n * rows * reps) / seconds(t0) / 1e9;
}

void write_floats(const std::filesystem::path& path, TensorView<const float> t) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(t.data), static_cast<std::streamsize>(t.size() * 4));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string data = "../shared/data/sst", kind = "ctn", dump_dir;
    int64_t dim = 70, steps = 20, batch = 27, groups = 4, eval_forest = 64;
    int threads = 1;
    Precision precision = Precision::Float32;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string key = argv[i], value = argv[i + 1];
      if (key == "--data") data = value;
      else if (key == "--model") kind = value;
      else if (key == "--dim") dim = std::stoll(value);
      else if (key == "--steps") steps = std::stoll(value);
      else if (key == "--batch") batch = std::stoll(value);
      else if (key == "--groups") groups = std::stoll(value);
      else if (key == "--threads") threads = std::stoi(value);
      else if (key == "--eval-forest") eval_forest = std::stoll(value);
      else if (key == "--dump") dump_dir = value;
      else if (key == "--precision") precision = parse_precision(value, "--precision");
      else fail("unknown option ", key,
                " (--data --model --dim --steps --batch --groups --eval-forest --threads --precision --dump)");
    }
    set_threads(threads);
    const TreeData d = load_tree_data("sst", data, {}, {});
    const bool fuzz = kind.find("+f") != std::string::npos, subspace = kind.find("+s") != std::string::npos;
    Model model = build_ctn({.vocabulary = d.vocabulary.size(), .dim = dim, .classes = 5, .fuzz = fuzz ? 0.02 : 0.0,
                             .subspace = subspace ? dim / 2 : 0, .activation_noise = subspace ? 0.05 : 0.0});
    model.values = std::make_shared<ParamStore<float>>(model.graph);
    model.values->initialize(model.graph, 1);
    ParamStore<float>& params = *model.values;
    TreeModel tm(model, SentimentTask::Fine, 1.0 / static_cast<double>(batch));
    tm.set_precision(precision);
    const std::vector<int64_t> order = permutation(static_cast<int64_t>(d.bank.train.size()), 1, 1000);
    const auto tree_at = [&](int64_t step, int64_t i) -> const SentimentTree& {
      return d.bank.train[static_cast<size_t>(order[static_cast<size_t>((step * batch + i) % static_cast<int64_t>(order.size()))])];
    };

    if (!dump_dir.empty()) {  // the first step's objective on the initial parameters
      std::filesystem::create_directories(dump_dir);
      double objective = 0;
      nlohmann::json ids = nlohmann::json::array();
      for (int64_t i = 0; i < batch; ++i) {
        const SentimentTree& t = tree_at(0, i);
        const UnrolledTree u = tm.unroll(t);
        Tape<float> tape(u.graph, params);
        tm.feed(tape, u, t);
        tape.forward();
        objective += tape.objective();
        nlohmann::json leaf_ids = nlohmann::json::array();
        for (int64_t n = 0; n < t.size(); ++n) {
          if (t.is_leaf(n)) leaf_ids.push_back(t.word_id[static_cast<size_t>(n)]);
        }
        ids.push_back(leaf_ids);
      }
      nlohmann::json manifest = {{"dim", dim}, {"batch", batch}, {"vocabulary", d.vocabulary.size()},
                                 {"objective", objective}, {"leaf_ids", ids}, {"trees", nlohmann::json::array()}};
      for (int64_t i = 0; i < batch; ++i) manifest["trees"].push_back(tree_at(0, i).line);
      for (const ParamEntry& e : params.entries()) {
        write_floats(std::filesystem::path(dump_dir) / (e.name + ".f32"), params.value(e));
        std::vector<int64_t> shape;
        for (int k = 0; k < e.shape.rank; ++k) shape.push_back(e.shape[k]);
        manifest["params"][e.name] = shape;
      }
      std::ofstream(std::filesystem::path(dump_dir) / "manifest.json") << manifest.dump(1) << "\n";
    }

    auto optimizer = make_optimizer("adagrad", params, {});
    Step step(params, *optimizer, {}, 1);
    step.add_transform(std::make_unique<L2Penalty>(params, kL2));
    // The trainer's steps: a graph per tree when parameters are perturbed per tree, else
    // one forest graph per step.
    TreeStepGraphs step_graphs;
    std::vector<const SentimentTree*> members;
    std::vector<uint64_t> examples;
    int64_t train_nodes = 0;
    double train_seconds[2] = {0, 0}, train_flop = 0;
    // Two passes over the same steps' trees, as over two epochs: the first compiles the
    // TreeTapes of level widths it meets for the first time (after two warm-up steps), the
    // second finds them compiled, as a run's steps mostly do after its first epoch.
    for (int pass = 0; pass < 2; ++pass) {
      for (int64_t s = pass == 0 ? -2 : 0; s < steps; ++s) {
        const Clock::time_point t0 = Clock::now();
        members.clear(), examples.clear();
        int64_t nodes = 0;
        for (int64_t i = 0; i < batch; ++i) {
          members.push_back(&tree_at(s + 2, i));
          examples.push_back(static_cast<uint64_t>(i + 1));
          nodes += members.back()->size();
        }
        step_graphs.assign(tm, params, members, examples, 1.0, static_cast<size_t>(groups));
        step_graphs.run(step, {.step = pass * (steps + 2) + s + 2, .learning_rate = 0.01, .momentum = 0});
        if (s < 0) continue;
        train_seconds[pass] += seconds(t0);
        if (pass == 1) continue;
        train_nodes += nodes;
        for (const SentimentTree* t : members) train_flop += 3 * forward_flop(*t, dim, 5);
      }
    }
    // Evaluation: the clean parent, one forward pass per tree, over as many trees, twice:
    // the first pass compiles the TreeTapes of the set's level widths, which the second
    // (as every evaluation of a run after its first) finds compiled.
    std::vector<SentimentTree> eval_trees;
    for (int64_t i = 0; i < steps * batch; ++i) eval_trees.push_back(tree_at(i / batch + steps + 2, i % batch));
    int64_t eval_nodes = 0;
    for (const SentimentTree& t : eval_trees) eval_nodes += t.size();
    double eval_flop = 0;
    for (const SentimentTree& t : eval_trees) eval_flop += forward_flop(t, dim, 5);
    double eval_seconds[2];
    for (double& pass : eval_seconds) {
      const Clock::time_point e0 = Clock::now();
      tm.evaluate(params, eval_trees, 0, 1, static_cast<size_t>(eval_forest));
      pass = seconds(e0);
    }
    double product = 0;  // on one thread: the pool's other threads idle
    for (const int64_t rows : {64, 256}) product = std::max(product, bilinear_gflops(dim, rows, precision));
    std::printf("{\"side\": \"pens\", \"model\": \"%s\", \"dim\": %lld, \"threads\": %d, \"train_nodes_per_s\": %.0f, "
                "\"train_again_nodes_per_s\": %.0f, \"eval_nodes_per_s\": %.0f, \"eval_first_nodes_per_s\": %.0f, "
                "\"train_flop_per_node\": %.0f, "
                "\"eval_flop_per_node\": %.0f, "
                "\"eval_gflops\": %.1f, \"bilinear_gflops\": %.1f, \"groups\": %lld, \"eval_forest\": %lld, "
                "\"precision\": \"%s\", \"steps\": %lld, \"nodes\": %lld}\n",
                kind.c_str(), static_cast<long long>(dim), threads, static_cast<double>(train_nodes) / train_seconds[0],
                static_cast<double>(train_nodes) / train_seconds[1],
                static_cast<double>(eval_nodes) / eval_seconds[1], static_cast<double>(eval_nodes) / eval_seconds[0],
                train_flop / static_cast<double>(train_nodes), eval_flop / static_cast<double>(eval_nodes),
                eval_flop / eval_seconds[1] / 1e9, product,
                static_cast<long long>(groups), static_cast<long long>(eval_forest), precision_name(precision),
                static_cast<long long>(steps),
                static_cast<long long>(train_nodes));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trees: %s\n", e.what());
    return 1;
  }
}
