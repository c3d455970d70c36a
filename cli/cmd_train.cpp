// pens train and pens eval: MNIST runs from a config file, and evaluation of a trained
// model file.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <type_traits>
#include <variant>

#include "cli/args.h"
#include "pens/autodiff/tape.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/data_source.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/serialization/json_text.h"
#include "pens/serialization/model_file.h"
#include "pens/train/config/config_file.h"
#include "pens/train/config/train_config.h"
#include "pens/train/config/tree_config.h"
#include "pens/train/dist/mpi_communicator.h"
#include "pens/train/loop/report.h"
#include "pens/train/loop/run.h"
#include "pens/train/tasks/evaluation.h"
#include "pens/train/tasks/tree_model.h"
#include "pens/train/tasks/tree_trainer.h"

namespace pens::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// "--budget-minutes": an option of the table as the command line spells it.
std::string option_name(const RunOptionSpec& spec) {
  std::string name = spec.name;
  std::replace(name.begin(), name.end(), '_', '-');
  return "--" + name;
}

// The files a finished run leaves in its folder, those that exist, comma-separated: a
// picture that could not be drawn is not claimed.
std::string existing_outputs(const std::string& out_dir) {
  std::string out;
  for (const char* name : {"summary.json", "metrics.jsonl", "model.json", "best.model.json", "checkpoint.pens",
                           "learning-curve.png", "filters.png"}) {
    if (fs::exists(fs::path(out_dir) / name)) out += (out.empty() ? "" : ", ") + std::string(name);
  }
  return out;
}

// On a terminal: one line redrawn in place (epoch, bar, objective, last errors, speed,
// ETA). Otherwise: a plain line per evaluation, for log files.
class Progress : public TrainObserver {
 public:
  // `header` is printed before the run's first output: a run refused while it is set up
  // prints its error line alone.
  Progress(const PreparedRun& run, std::string header)
      : tty_(::isatty(STDERR_FILENO) != 0),
        budget_seconds_(60.0 * run.budget_minutes()),
        header_(std::move(header)),
        task_(*run.task) {}

  void on_step(int64_t step, int64_t total, double epoch, double objective, double elapsed) override {
    print_header();
    smoothed_ = smoothed_ < 0 ? objective : 0.98 * smoothed_ + 0.02 * objective;
    if (!tty_) return;
    const auto now = std::chrono::steady_clock::now();
    if (step != total && now - drawn_ < std::chrono::milliseconds(200)) return;
    drawn_ = now;
    double eta = elapsed / static_cast<double>(step) * static_cast<double>(total - step);
    if (budget_seconds_ > 0) eta = std::min(eta, budget_seconds_ - elapsed);
    const double fraction = static_cast<double>(step) / static_cast<double>(total);
    const int filled = static_cast<int>(fraction * 24);
    std::fprintf(stderr, "\r\033[Kepoch %6.2f [%s%s] %3.0f%%  loss %.4f  val %s  test %s  ETA %s", epoch,
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(24 - filled), '.').c_str(), 100 * fraction, smoothed_,
                 last_validation_.c_str(), last_test_.c_str(), duration_text(eta).c_str());
    std::fflush(stderr);
  }
  void on_eval(const json& m) override {
    print_header();
    last_validation_ = percent_text(m["validation_error"]);
    last_test_ = percent_text(m["test_error"]);
    if (tty_) return;
    // "" for a run that reports its evaluations as messages.
    if (const std::string line = task_.evaluation_line(m); !line.empty()) {
      std::fprintf(stderr, "%s\n", line.c_str());
      std::fflush(stderr);
    }
  }
  void on_message(const std::string& text) override {
    print_header();
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "%s\n", text.c_str());
    std::fflush(stderr);
  }
  void finish() {
    if (tty_) std::fprintf(stderr, "\n");
  }

 private:
  void print_header() {
    if (header_.empty()) return;
    std::fprintf(stderr, "%s\n", header_.c_str());
    header_.clear();
  }

  bool tty_;
  double budget_seconds_;
  std::string header_;
  double smoothed_ = -1;
  std::string last_validation_ = "-", last_test_ = "-";
  std::chrono::steady_clock::time_point drawn_{};
  const PreparedTask& task_;
};

// Prints how a run ended: its divergence (false) or its length (true).
bool ended_well(const TrainSummary& summary) {
  const json& s = summary.json;
  if (summary.diverged) {
    std::cerr << "pens train: " << s["message"].get<std::string>() << "\n";
    return false;
  }
  std::cout << "finished " << s["epochs"].get<double>() << " epochs in " << duration_text(s["wall_seconds"].get<double>())
            << "\n";
  return true;
}

// pens train's results: the kind of run's lines (the test figure at the best validation
// or dev evaluation), and the outputs.
void print_results(const PreparedRun& run, const TrainSummary& summary) {
  for (const std::string& line : run.task->results(summary.json)) std::cout << line << "\n";
  std::cout << "outputs in " << run.out_dir << ": " << existing_outputs(run.out_dir) << "\n";
}

// What pens eval reads when it is given a run folder instead of a model file: the run's
// best model, and the data folder and vocabulary of its config (options still override).
struct EvalSource {
  std::string model_path;
  std::optional<std::string> data_dir;
  VocabularyPolicy vocabulary;
  // The run's data source and its settings (a model file alone: MNIST's, or the SST's for a
  // tree model).
  std::optional<std::string> data_source;
  Attributes data_settings;
};

EvalSource eval_source(const std::string& given) {
  EvalSource source;
  if (!std::filesystem::is_directory(given)) {
    source.model_path = given;
    return source;
  }
  const std::filesystem::path dir(given);
  for (const char* name : {"config.json", "best.model.json"}) {
    if (!std::filesystem::exists(dir / name)) fail(given, " is a folder but not a run folder: it has no ", name);
  }
  const std::string config_path = (dir / "config.json").string();
  const json j = read_json_file(config_path);
  source.model_path = (dir / "best.model.json").string();
  if (run_kind_of(j) == "trees") {
    const TreeConfig c = parse_tree_config(j, config_path);
    source.data_dir = c.data_dir;
    source.data_source = c.data_source;
    source.data_settings = c.data_settings;
    source.vocabulary = c.vocabulary;
  } else {
    const TrainConfig c = parse_train_config(j, config_path);
    source.data_dir = c.data_dir;
    source.data_source = c.data_source;
    source.data_settings = c.data_settings;
  }
  return source;
}

// pens eval on a tree model: root accuracy (fine and binary come from the model's
// classes) and all-node accuracy, with the roots' confusion matrix.
int eval_tree_model(const Args& args, const EvalSource& source, const Model& model) {
  const std::string& model_path = source.model_path;
  const std::string part = args.option("data").value_or("test");
  const TreeModel tm(model, task_of(model));
  // --task binary on a fine-grained model: its probabilities folded to negative/positive.
  const SentimentTask task = parse_sentiment_task(args.option("task").value_or(task_name(tm.task())));
  if (task == SentimentTask::Fine && tm.task() != SentimentTask::Fine) {
    fail(model_path, ": a binary model has no fine-grained predictions (--task fine)");
  }
  const bool fold = task != tm.task();
  const int64_t classes = task_classes(task);
  const VocabularyPolicy policy = vocabulary_policy(args, source.vocabulary);
  const TreeData data = load_tree_data(source.data_source.value_or("sst"),
                                       args.option("data-dir").value_or(source.data_dir.value_or("../shared/data/sst")),
                                       source.data_settings, policy);
  const std::vector<SentimentTree>* trees = part == "train" ? &data.bank.train
                                            : part == "dev"  ? &data.bank.dev
                                            : part == "test" ? &data.bank.test
                                                             : nullptr;
  if (!trees) fail("--data must be train, dev or test for a tree model, got '", part, "'");
  for (const std::string& table : tm.word_tables()) {
    if (const int64_t rows = model.values->at(table).shape[0]; rows != data.vocabulary.size()) {
      fail(model_path, ": ", table, " has ", rows, " rows but the vocabulary with --min-count ", policy.min_count,
           policy.lowercase ? " and --lowercase" : "", " has ", data.vocabulary.size(),
           " words (give the options training's data section had, or the run folder: pens eval RUN_DIR)");
    }
  }
  const int64_t samples = args.option_int("samples", 50, 1, kMaxSamples);
  const auto seed = static_cast<uint64_t>(args.option_int("seed", 1, 0, kMaxSeed));
  const TreeEvaluation e = tm.evaluate(*model.values, *trees, samples, seed, 64, fold);
  std::printf("%s on SST %s (%s task%s, %lld roots, %lld labeled nodes)%s:\n"
              "  root accuracy %.2f%%\n  all-node accuracy %.2f%%\n\n",
              model_path.c_str(), part.c_str(), task_name(task),
              fold ? ", the fine-grained model's probabilities folded" : "", static_cast<long long>(e.roots),
              static_cast<long long>(e.nodes),
              tm.samples_subspaces() && samples > 0 ? cat(", mean of ", samples, " subspace draws").c_str() : "",
              100 * e.root_accuracy(), 100 * e.node_accuracy());
  std::printf("roots' confusion (rows: true class, columns: predicted)\n      ");
  for (int64_t c = 0; c < classes; ++c) std::printf("%6lld", static_cast<long long>(c));
  std::printf("\n");
  for (int64_t t = 0; t < classes; ++t) {
    std::printf("%6lld", static_cast<long long>(t));
    for (int64_t c = 0; c < classes; ++c) std::printf("%6lld", static_cast<long long>(e.confusion[static_cast<size_t>(t)][static_cast<size_t>(c)]));
    std::printf("\n");
  }
  return 0;
}

// One process of a data-parallel `pens train`. Process 0 reports and writes; a problem
// the processes agreed on (a setup error in any of them, a step's error or NaN) ends all
// of them normally, process 0 printing it; an error one process met alone ends the run
// through MPI_Abort, since the others wait for it in a collective call. The processes
// leave together, after process 0 has printed: mpirun stops the run at the first process
// that exits with an error, and would cut process 0's message short.
int train_data_parallel(const std::string& config_path, RunOptions options, Communicator& world) {
  const bool reporter = world.rank() == 0;
  // Threads beyond the CPUs mpirun bound this process to would only take turns on them.
  options.max_threads = usable_cpus();
  int status = 0;
  try {
    PreparedRun run;
    together(world, [&] { run = prepare_run(config_path, options); });
    TrainObserver quiet;
    Progress progress(run, cat(run.description, "; ", world.size(), " processes (threads are per process)"));
    const TrainSummary summary = run_training(run, reporter ? static_cast<TrainObserver&>(progress) : quiet, &world);
    status = summary.diverged ? 1 : 0;
    if (reporter) {
      progress.finish();
      if (ended_well(summary)) print_results(run, summary);
    }
  } catch (const CollectiveError& e) {
    if (reporter) std::cerr << "pens train: error: " << e.what() << "\n";
    status = 1;
  } catch (const std::exception& e) {
    std::cerr << "pens train: error: process " << world.rank() << ": " << e.what() << "\n";
    mpi_abort(1);
  }
  world.broadcast(0);
  return status;
}

}  // namespace

std::string train_options_help() {
  std::string out;
  for (const RunOptionSpec& spec : run_option_specs()) {
    std::string head = cat("  ", option_name(spec), *spec.placeholder ? " " : "", spec.placeholder);
    // The help wrapped at 86 columns, from column 25.
    std::string line = head + std::string(head.size() < 25 ? 25 - head.size() : 1, ' ');
    std::stringstream words(spec.help);
    for (std::string word; words >> word;) {
      if (line.size() + word.size() + 1 > 86 && line.size() > 25) {
        out += line + "\n";
        line = std::string(25, ' ');
      }
      line += (line.back() == ' ' ? "" : " ") + word;
    }
    out += line + "\n";
  }
  return out;
}

int run_config(const std::vector<std::string>& argv) {
  const Args args(argv, {}, {});
  std::cout << format_json(read_config_file(args.one_positional("a config"))) << "\n";
  return 0;
}

int run_train(const std::vector<std::string>& argv) {
  std::vector<std::string> flags, valued;
  for (const RunOptionSpec& spec : run_option_specs()) {
    (std::holds_alternative<bool RunOptions::*>(spec.member) ? flags : valued).push_back(option_name(spec).substr(2));
  }
  const Args args(argv, flags, valued);
  const std::string& config_path = args.one_positional("a training config");
  RunOptions options;
  for (const RunOptionSpec& spec : run_option_specs()) {
    const std::string name = option_name(spec).substr(2);
    std::visit(
        [&](auto member) {
          using T = std::remove_reference_t<decltype(options.*member)>;
          if constexpr (std::is_same_v<T, bool>) {
            options.*member = args.flag(name);
          } else if constexpr (std::is_same_v<T, std::optional<std::string>>) {
            options.*member = args.option(name);
          } else if constexpr (std::is_same_v<T, std::optional<double>>) {
            options.*member = args.given_double(name, AttrRange::from_to(spec.low, spec.high));
          } else {
            const std::optional<int64_t> n =
                args.given_int(name, static_cast<int64_t>(spec.low), static_cast<int64_t>(spec.high));
            if (n) options.*member = static_cast<typename T::value_type>(*n);
          }
        },
        spec.member);
  }
  // Started by mpirun: one process of a data-parallel run (docs/distributed.md).
  const std::unique_ptr<Communicator> world = mpi_world();
  if (world && world->size() > 1) return train_data_parallel(config_path, options, *world);
  const PreparedRun run = prepare_run(config_path, options);
  Progress progress(run, run.description);
  const TrainSummary summary = run_training(run, progress);
  progress.finish();
  if (!ended_well(summary)) return 1;
  print_results(run, summary);
  return 0;
}

int run_eval(const std::vector<std::string>& argv) {
  const Args args(argv, {"lowercase"}, {"data", "data-dir", "batch", "samples", "seed", "min-count", "task"});
  const EvalSource source = eval_source(args.one_positional("a model file or a run folder"));
  const std::string& model_path = source.model_path;
  const Model model = load_model(model_path);
  const auto untrained = [&] { fail(model_path, ": the model holds no parameter values (train it first)"); };
  if (model.tree) {
    if (!model.values) untrained();
    return eval_tree_model(args, source, model);
  }
  if (args.option("task")) fail(model_path, ": --task is for tree models");
  const std::string part = args.option("data").value_or("test");
  if (part != "train" && part != "test") fail("--data ", part, ": expected train or test");
  const std::string data_dir = args.option("data-dir").value_or(source.data_dir.value_or("data/mnist"));
  const std::string data_source = source.data_source.value_or("mnist");
  const Dataset d = DataSourceRegistry::global().at(data_source).load(data_dir, source.data_settings, part);
  if (d.size == 0) fail(data_dir, ": the ", data_source, " data source holds no ", part, " examples");
  const int64_t samples = args.option_int("samples", 0, 0, kMaxSamples);
  const auto seed = static_cast<uint64_t>(args.option_int("seed", 1, 0, kMaxSeed));
  const Graph g = build_inference(model.graph, samples);
  const ClassifierIo io = classifier_io(g, model_path, false);
  check_data_fits(g, io, d, model_path, cat(data_dir, ", ", part, " images"));
  if (!model.values) untrained();
  const int64_t batch = args.option_int("batch", 1000, 1, kMaxBatch);
  Tape<float> tape(g, *model.values, {.batch = batch});
  tape.set_noise_key({seed, 0});
  const auto confusion = confusion_matrix(tape, io.x, io.output, d);
  int64_t wrong = d.size;
  for (size_t c = 0; c < confusion.size(); ++c) wrong -= confusion[c][c];
  std::printf("%s on %s %s (%lld examples)%s: error %.2f%% (%lld wrong)\n\n", model_path.c_str(),
              data_source == "mnist" ? "MNIST" : data_dir.c_str(), part.c_str(),
              static_cast<long long>(d.size), samples > 0 ? cat(", mean of ", samples, " sampled children").c_str() : "",
              100.0 * static_cast<double>(wrong) / static_cast<double>(d.size), static_cast<long long>(wrong));
  std::printf("confusion (rows: true class, columns: predicted)\n      ");
  for (size_t c = 0; c < confusion.size(); ++c) std::printf("%6zu", c);
  std::printf("\n");
  for (size_t t = 0; t < confusion.size(); ++t) {
    std::printf("%6zu", t);
    for (size_t c = 0; c < confusion.size(); ++c) std::printf("%6lld", static_cast<long long>(confusion[t][c]));
    std::printf("\n");
  }
  return 0;
}

}  // namespace pens::cli
