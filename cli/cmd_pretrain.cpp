// pens pretrain: greedy layer-wise denoising-autoencoder pre-training on MNIST images.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/args.h"
#include "pens/models/mnist.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/train/config/config_file.h"
#include "pens/train/loop/run.h"
#include "pens/train/loop/run_folder.h"
#include "pens/train/tasks/pretrain.h"
#include "pens/train/tasks/skipgram.h"

namespace pens::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A line per epoch of each layer; on a terminal, the step count of the current epoch
// redrawn in place between them.
class PretrainProgress : public TrainObserver {
 public:
  PretrainProgress() : tty_(::isatty(STDERR_FILENO) != 0) {}

  void on_step(int64_t step, int64_t total, double epoch, double objective, double elapsed) override {
    if (!tty_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - drawn_ < std::chrono::milliseconds(200)) return;
    drawn_ = now;
    std::fprintf(stderr, "\r\033[Kstep %lld/%lld  epoch %.2f  objective %.4f  %.0fs", static_cast<long long>(step),
                 static_cast<long long>(total), epoch, objective, elapsed);
    std::fflush(stderr);
  }
  void on_eval(const json& m) override {
    if (!m.contains("layer")) return;  // skip-gram reports its epochs as messages
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "layer %s  epoch %3lld  objective %.4f  denoising error %.4f  clean %.4f  lr %.4g  %.0fs\n",
                 m["layer"].get<std::string>().c_str(), static_cast<long long>(m["epoch"].get<int64_t>()),
                 m["objective"].get<double>(), m["denoising_error"].get<double>(), m["clean_reconstruction"].get<double>(),
                 m["learning_rate"].get<double>(), m["elapsed_seconds"].get<double>());
    std::fflush(stderr);
  }
  void on_message(const std::string& text) override {
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "%s\n", text.c_str());
    std::fflush(stderr);
  }

 private:
  bool tty_;
  std::chrono::steady_clock::time_point drawn_{};
};

}  // namespace

namespace {

// pens pretrain on a skip-gram config: word vectors for a tree network.
int pretrain_skipgram(const Args& args, const std::string& config_path, const json& j) {
  SkipgramConfig config = parse_skipgram_config(j, config_path);
  config.data_dir = configured_data_dir(config_path, j, config.data_dir, args.option("data-dir"));
  config.epochs = args.option_int("epochs", config.epochs, 1, kMaxCount);
  config.threads = static_cast<int>(args.option_int("threads", config.threads, 0, 1024));
  config.seed = static_cast<uint64_t>(args.option_int("seed", static_cast<int64_t>(config.seed), 0, kMaxSeed));
  config.budget_minutes = args.option_double("budget-minutes", config.budget_minutes, AttrRange::at_least(0));
  if (config.epochs < 1) fail("--epochs must be at least 1");
  const std::string out_dir =
      args.option("out").value_or((fs::path("runs") / fs::path(config_path).stem()).string());
  RunOptions options;
  options.resume = args.flag("resume");
  const Resume resume = resume_of(options, out_dir);
  const TreeData data = load_tree_data(config.data_source, config.data_dir, config.data_settings, config.vocabulary);
  std::cerr << "pens pretrain: skip-gram word vectors on " << config.data_dir << ", " << config.epochs
            << " epochs; writing " << out_dir << "\n";
  PretrainProgress progress;
  const TrainSummary summary = pretrain_word_vectors(config, data, out_dir, progress, resume);
  if (summary.diverged) return 1;
  std::printf("word vectors in %s/model.json (parameter E, scaled to std %g from %g); tree configs read them with "
              "\"init_from\"\n",
              out_dir.c_str(), config.word_std, summary.json["word_std_before_scaling"].get<double>());
  return 0;
}

}  // namespace

int run_pretrain(const std::vector<std::string>& argv) {
  const Args args(argv, {"resume"}, {"out", "epochs", "data-dir", "threads", "seed", "budget-minutes"});
  const std::string& config_path = args.one_positional("a pre-training config");
  const json j = read_config_file(config_path);
  if (run_kind_of(j) == "skipgram") return pretrain_skipgram(args, config_path, j);
  PretrainConfig config = parse_pretrain_config(j, config_path);
  config.model = relative_to_config(config_path, config.model);
  config.data_dir = configured_data_dir(config_path, j, config.data_dir, args.option("data-dir"));
  if (args.option("epochs")) {
    const int64_t epochs = args.option_int("epochs", 1, 1, kMaxCount);
    for (PretrainLayer& layer : config.layers) layer.epochs = epochs;
  }
  config.threads = static_cast<int>(args.option_int("threads", config.threads, 0, 1024));
  config.seed = static_cast<uint64_t>(args.option_int("seed", static_cast<int64_t>(config.seed), 0, kMaxSeed));
  config.budget_minutes = args.option_double("budget-minutes", config.budget_minutes, AttrRange::at_least(0));
  const std::string out_dir =
      args.option("out").value_or((fs::path("runs") / fs::path(config_path).stem()).string());
  RunOptions options;
  options.resume = args.flag("resume");
  const Resume resume = resume_of(options, out_dir);

  const Dataset images = load_mnist(config.data_dir, "train");
  std::cerr << "pens pretrain: " << config.model << ", " << config.layers.size() << " layers on " << images.size
            << " images (labels unused), " << threads_text(config.threads) << budget_text(config.budget_minutes)
            << "; writing " << out_dir << "\n";
  PretrainProgress progress;
  const TrainSummary summary = pretrain(config, images, out_dir, progress, resume);
  if (summary.diverged) return 1;
  for (const json& l : summary.json["layers"]) {
    std::printf("layer %s: denoising error %.4f -> %.4f, clean reconstruction %.4f -> %.4f\n",
                l["layer"].get<std::string>().c_str(), l["denoising_error"][0].get<double>(),
                l["denoising_error"][1].get<double>(), l["clean_reconstruction"][0].get<double>(),
                l["clean_reconstruction"][1].get<double>());
  }
  std::printf("pre-trained model: %s (first-layer filters: %s)\n", (fs::path(out_dir) / "model.json").c_str(),
              (fs::path(out_dir) / "filters.png").c_str());
  return 0;
}

}  // namespace pens::cli
