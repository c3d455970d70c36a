// Command-line parsing for the pens subcommands: flags (--json), options with a value
// (--op NAME or --op=NAME) and positional arguments. Anything not declared is an error.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pens/models/sst.h"
#include "pens/ops/ir/attributes.h"

namespace pens::cli {

class Args {
 public:
  // `flags` take no value, `options` take one.
  Args(const std::vector<std::string>& argv, const std::vector<std::string>& flags,
       const std::vector<std::string>& options);

  bool flag(const std::string& name) const;
  // The option's value (the last one when given several times).
  std::optional<std::string> option(const std::string& name) const;
  std::vector<std::string> all(const std::string& name) const;  // every value, in order
  // Every number on a command line is read by one of these two, with its domain: an
  // integer in [lo, hi], the message naming both when it is not.
  int64_t option_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const;
  // A finite number in `range` (NaN and infinities refused), the message naming both.
  double option_double(const std::string& name, double fallback, const AttrRange& range) const;
  // The same for options that override something only when given: nullopt when absent.
  std::optional<int64_t> given_int(const std::string& name, int64_t lo, int64_t hi) const;
  std::optional<double> given_double(const std::string& name, const AttrRange& range) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // The single positional argument a command takes (a model file).
  const std::string& one_positional(const char* what) const;

 private:
  int64_t parse_int(const std::string& name, int64_t fallback) const;
  double parse_double(const std::string& name, double fallback) const;

  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

// The treebank vocabulary's options, --min-count K and --lowercase, as a config's data section
// gives them (pens new ctn and pens eval must build E's rows the same way training does),
// over `defaults` (pens eval of a run folder: its config's).
VocabularyPolicy vocabulary_policy(const Args& args, const VocabularyPolicy& defaults = {});

// Domains of the integers commands take: seeds (as configs allow them) and counts.
inline constexpr int64_t kMaxSeed = 1'000'000'000'000'000;
inline constexpr int64_t kMaxCount = 1'000'000'000;
inline constexpr int64_t kMaxBatch = 1'000'000;     // as configs allow (memory is checked apart)
inline constexpr int64_t kMaxChildren = 64;       // as pseudo_ensemble.children
inline constexpr int64_t kMaxSamples = 10'000;      // as configs' eval.samples

struct Command {
  std::string name;
  std::string summary;
  std::string usage;  // full help text
  int (*run)(const std::vector<std::string>& argv);
};

int run_ops(const std::vector<std::string>& argv);
int run_kinds(const std::vector<std::string>& argv);
int run_gradcheck(const std::vector<std::string>& argv);
int run_inspect(const std::vector<std::string>& argv);
int run_fmt(const std::vector<std::string>& argv);
int run_new(const std::vector<std::string>& argv);
int run_average(const std::vector<std::string>& argv);
int run_config(const std::vector<std::string>& argv);
int run_train(const std::vector<std::string>& argv);
// pens train's options (train/loop/run_kind.h's table), as its help lists them.
std::string train_options_help();
int run_pretrain(const std::vector<std::string>& argv);
int run_eval(const std::vector<std::string>& argv);

}  // namespace pens::cli
