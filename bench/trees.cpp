// Tree throughput: the compact tensor network on SST training trees, one step of
// `batch` trees at a time in `groups` groups on the threads (graphs built, perturbed and
// compiled each step, AdaGrad with the paper's ℓ2), and evaluation (the clean parent's forward pass per tree). Prints one
// JSON object: {"side": "pens", "model", "dim", "threads", "train_nodes_per_s",
// "eval_nodes_per_s", "steps", "nodes"}. With --dump DIR, also writes the parameters
// (one float32 file each), the first step's trees (their lines in train.txt) with their
// leaves' vocabulary ids, and pens' objective on them, for bench/torch_trees.py to check
// that it computes the same function.
//
//   build/bench/trees --data ../shared/data/sst [--model ctn|ctn+s|ctn+f|ctn+f+s] [--dim 70]
//                     [--steps 20] [--batch 27] [--groups 4] [--threads 1] [--dump DIR]
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

void write_floats(const std::filesystem::path& path, TensorView<const float> t) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(t.data), static_cast<std::streamsize>(t.size() * 4));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string data = "../shared/data/sst", kind = "ctn", dump_dir;
    int64_t dim = 70, steps = 20, batch = 27, groups = 4;
    int threads = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string key = argv[i], value = argv[i + 1];
      if (key == "--data") data = value;
      else if (key == "--model") kind = value;
      else if (key == "--dim") dim = std::stoll(value);
      else if (key == "--steps") steps = std::stoll(value);
      else if (key == "--batch") batch = std::stoll(value);
      else if (key == "--groups") groups = std::stoll(value);
      else if (key == "--threads") threads = std::stoi(value);
      else if (key == "--dump") dump_dir = value;
      else fail("unknown option ", key, " (--data --model --dim --steps --batch --groups --threads --dump)");
    }
    set_threads(threads);
    const TreeData d = load_tree_data("sst", data, {}, {});
    const bool fuzz = kind.find("+f") != std::string::npos, subspace = kind.find("+s") != std::string::npos;
    Model model = build_ctn({.vocabulary = d.vocabulary.size(), .dim = dim, .classes = 5, .fuzz = fuzz ? 0.02 : 0.0,
                             .subspace = subspace ? dim / 2 : 0, .activation_noise = subspace ? 0.05 : 0.0});
    model.values = std::make_shared<ParamStore<float>>(model.graph);
    model.values->initialize(model.graph, 1);
    ParamStore<float>& params = *model.values;
    const TreeModel tm(model, SentimentTask::Fine, 1.0 / static_cast<double>(batch));
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
    double train_seconds = 0;
    for (int64_t s = -2; s < steps; ++s) {  // two warm-up steps
      const Clock::time_point t0 = Clock::now();
      members.clear(), examples.clear();
      int64_t nodes = 0;
      for (int64_t i = 0; i < batch; ++i) {
        members.push_back(&tree_at(s + 2, i));
        examples.push_back(static_cast<uint64_t>(i + 1));
        nodes += members.back()->size();
      }
      step_graphs.assign(tm, params, members, examples, 1.0, static_cast<size_t>(groups));
      step_graphs.run(step, {.step = s + 2, .learning_rate = 0.01, .momentum = 0});
      if (s >= 0) {
        train_seconds += seconds(t0);
        train_nodes += nodes;
      }
    }
    // Evaluation: the clean parent, one forward pass per tree, over as many trees.
    std::vector<SentimentTree> eval_trees;
    for (int64_t i = 0; i < steps * batch; ++i) eval_trees.push_back(tree_at(i / batch + steps + 2, i % batch));
    int64_t eval_nodes = 0;
    for (const SentimentTree& t : eval_trees) eval_nodes += t.size();
    const Clock::time_point e0 = Clock::now();
    tm.evaluate(params, eval_trees, 0, 1);
    const double eval_seconds = seconds(e0);
    std::printf("{\"side\": \"pens\", \"model\": \"%s\", \"dim\": %lld, \"threads\": %d, \"train_nodes_per_s\": %.0f, "
                "\"eval_nodes_per_s\": %.0f, \"groups\": %lld, \"steps\": %lld, \"nodes\": %lld}\n",
                kind.c_str(), static_cast<long long>(dim), threads, static_cast<double>(train_nodes) / train_seconds,
                static_cast<double>(eval_nodes) / eval_seconds, static_cast<long long>(groups), static_cast<long long>(steps),
                static_cast<long long>(train_nodes));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trees: %s\n", e.what());
    return 1;
  }
}
