// Kinds of training run: what `pens train CONFIG` (and pens.train in Python) can run. A
// config names its kind ("kind": "classifier" or "trees"); a config that does not is read
// as it always was (run_kind_of, the one place where a kind is inferred). Each kind reads
// its config and the options that override it, loads its data and trains through the run
// loop (train/loop/run_loop.h). Kinds are an open registry, like ops and data sources:
// RunKindRegistry::register_global() adds one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "pens/models/data_source.h"
#include "pens/ops/ir/named_table.h"
#include "pens/train/dist/communicator.h"
#include "pens/train/loop/observer.h"
#include "pens/train/loop/run_folder.h"

namespace pens {

// What overrides the config; unset: the config's value. Checked by the kind.
struct RunOptions {
  std::optional<std::string> out;          // default runs/<config's stem>
  std::optional<std::string> init;         // a model file whose values start the run
  std::optional<std::string> data_dir;
  std::optional<uint64_t> seed;
  std::optional<int64_t> epochs;
  std::optional<double> budget_minutes;    // 0: none
  std::optional<int> threads;              // 0: every CPU this process may use
  std::optional<int> max_threads;          // caps the threads (a data-parallel process: its CPUs)
  std::optional<int64_t> labels;           // dense runs: labeled examples
  std::optional<uint64_t> split_seed;      // dense runs: which examples are labeled
  std::optional<int64_t> shards;           // dense runs: batch.shards
  std::optional<std::string> precision;    // dense runs: precision ("float32" or "bfloat16")
  bool resume = false;                     // from the output folder's checkpoint
  // Resume from this checkpoint: a path, or the name of one kept in the output folder.
  std::optional<std::string> resume_from;
};

// One option of RunOptions as the command line (`--budget-minutes M`) and the Python
// package (`budget_minutes=M`) both take it: one table, so that the tool's parsing, its
// help text and the Python keywords cannot drift apart (tests check the Python keywords
// against it). The command line's name is `name` with '-' for '_'.
struct RunOptionSpec {
  using Member = std::variant<std::optional<std::string> RunOptions::*, std::optional<uint64_t> RunOptions::*,
                              std::optional<int64_t> RunOptions::*, std::optional<int> RunOptions::*,
                              std::optional<double> RunOptions::*, bool RunOptions::*>;
  const char* name;
  Member member;
  const char* placeholder;  // the value in the help ("DIR"); "" for a flag
  const char* help;         // what it does, one line or more
  double low = 0, high = 0;  // a number's range
};
const std::vector<RunOptionSpec>& run_option_specs();

// Data given by the caller (the Python package's NumPy arrays) in place of what the
// config's data section names; `name` stands for it where the run names its data
// (config.json's data.dir, messages).
struct GivenData {
  TrainData data;
  std::string name;
};

// A run of some kind, read, checked and with its data loaded: ready to train.
class PreparedTask {
 public:
  virtual ~PreparedTask() = default;
  virtual double budget_minutes() const = 0;
  // "MODEL on DATA for N epochs ..., T threads": the run's first line, after "pens train: ".
  virtual std::string description() const = 0;
  // Trains (or resumes) into `out_dir`; data-parallel over `communicator` when it has
  // more than one process.
  virtual TrainSummary train(const std::string& out_dir, TrainObserver& observer, const Resume& resume,
                             Communicator* communicator) const = 0;
  // A line for an evaluation's metrics in a log ("" when the run reports its evaluations
  // itself, as messages), and the lines that say how a finished run came out.
  virtual std::string evaluation_line(const nlohmann::json& metrics) const = 0;
  virtual std::vector<std::string> results(const nlohmann::json& summary) const = 0;
};

struct RunKind {
  static constexpr const char* kWhat = "kind of run";
  std::string name;
  std::string summary;
  // Reads the config `config` (the JSON of the file at `config_path`) with `options` and
  // loads its data (or takes `given`); an Error names what is wrong.
  std::function<std::unique_ptr<PreparedTask>(const std::string& config_path, const nlohmann::json& config,
                                              const RunOptions& options, std::optional<GivenData> given)>
      prepare;
};

// RunKindRegistry::global().at("trees"); RunKindRegistry::register_global(kind) adds one.
using RunKindRegistry = Registry<RunKind>;
template <>
std::vector<RunKind> builtin_kinds<RunKind>();

// The kind of a config's JSON: its "kind"; without one, as configs were read before kinds
// were named: "skipgram" for a "task" of "skipgram" (pens pretrain's), "trees" for any
// other "task", "classifier" otherwise.
std::string run_kind_of(const nlohmann::json& config);

// The built-in kinds, each defined beside its task, and registered in
// train/tasks/run_kinds.cpp.
RunKind classifier_run_kind();  // train/tasks/trainer.cpp
RunKind tree_run_kind();        // train/tasks/tree_trainer.cpp

}  // namespace pens
