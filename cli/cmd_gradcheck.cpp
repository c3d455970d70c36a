#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>

#include "cli/args.h"
#include "cli/ensemble_args.h"
#include "pens/autodiff/gradcheck.h"
#include "pens/ops/parallel.h"
#include "pens/ops/registry.h"
#include "pens/serialization/model_file.h"

namespace pens::cli {

namespace {

// What model and op checks share: --tolerance and --step, each a finite number above 0.
GradcheckOptions common_options(const Args& args) {
  GradcheckOptions options;
  options.tolerance = args.option_double("tolerance", options.tolerance, AttrRange::above(0));
  options.step = args.option_double("step", options.step, AttrRange::above(0));
  return options;
}

// A line on stderr every 5 s while a check runs (none for a check that ends sooner), and a
// last one at the end when any was printed: elements done, time so far,
// the time left at the rate so far.
std::function<void(int64_t, int64_t)> progress_printer() {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto last = std::make_shared<Clock::time_point>(start);  // of the last line; start: none yet
  return [start, last](int64_t done, int64_t total) {
    const Clock::time_point now = Clock::now();
    const bool printed = *last != start;
    const bool due = now - *last >= std::chrono::seconds(5);
    if (done == total ? !printed : !due) return;
    *last = now;
    const double elapsed = std::chrono::duration<double>(now - start).count();
    const double left = elapsed / static_cast<double>(done) * static_cast<double>(total - done);
    std::fprintf(stderr, "gradcheck: %lld of %lld elements, %.0f s, about %.0f s left\n", static_cast<long long>(done),
                 static_cast<long long>(total), elapsed, left);
  };
}

int check_model(const Args& args) {
  const std::string& path = args.one_positional("a model file");
  const Model model = load_model(path);
  const BuiltGraph built = build_for_cli(model, args);
  GradcheckOptions options = common_options(args);
  options.batch = built.batch;
  options.inputs = false;
  options.init_seed = static_cast<uint64_t>(args.option_int("init-seed", 1, 0, kMaxSeed));
  const auto sample = args.option("sample");
  if (sample && *sample == "all") {
    options.sample = 0;
  } else {
    options.sample = args.option_int("sample", default_sample(built.graph, built.batch), 0, int64_t{1} << 40);
  }
  options.progress = progress_printer();
  const GradcheckResult r = gradcheck(built.graph, label_values(built.graph, built.batch), options);
  std::cout << path << ": d objective / d parameters, " << r.variables << " parameter elements"
            << (r.checked < r.variables ? cat(" (", r.checked, " checked: ", options.sample,
                                              " per tensor; --sample all checks every one)")
                                        : std::string())
            << ", " << (built.ensemble ? cat(built.ensemble->spec.children, " children, ") : std::string())
            << (built.graph.declares_batch() ? cat("batch ", built.batch) : std::string("one tree")) << "\n";
  char line[200];
  std::snprintf(line, sizeof line, "max rel error %.2e (tolerance %.0e): %s", r.max_error, options.tolerance,
                r.passed ? "ok" : "FAIL");
  std::cout << line << "\n";
  if (r.truncated > 0) {
    std::snprintf(line, sizeof line,
                  "%lld entries within tolerance only after extrapolation to smaller steps: their central "
                  "differences at h were off by up to %.1e (truncation error, not a wrong gradient)",
                  static_cast<long long>(r.truncated), r.max_plain_error);
    std::cout << line << "\n";
  }
  if (!r.passed) std::cout << "worst entry: " << r.worst << "\n";
  return r.passed ? 0 : 1;
}

}  // namespace

int run_gradcheck(const std::vector<std::string>& argv) {
  std::vector<std::string> known = kEnsembleOptions;
  for (const char* o : {"op", "tolerance", "step", "init-seed", "sample", "threads"}) known.push_back(o);
  const Args args(argv, {"all-ops", "parent"}, known);
  set_threads(static_cast<int>(args.option_int("threads", 0, 0, 1024)));
  if (!args.positional().empty()) return check_model(args);
  std::vector<const OpDef*> ops;
  if (args.flag("all-ops")) {
    ops = OpRegistry::global().all();
  } else if (auto name = args.option("op")) {
    ops.push_back(&OpRegistry::global().at(*name));
  } else {
    fail("nothing to check: give a model file, --all-ops or --op NAME");
  }
  const GradcheckOptions options = common_options(args);
  int failed = 0, checked = 0, not_differentiable = 0;
  for (const OpDef* op : ops) {
    double worst = 0;
    int64_t entries = 0;
    std::string first_failure;  // "case: worst entry" of the first failing case
    for (const OpCheckResult& r : gradcheck_op(*op, options)) {
      entries += r.result.entries;
      worst = std::max(worst, r.result.max_error);
      if (!r.result.passed && first_failure.empty()) first_failure = r.label + ": " + r.result.worst;
    }
    const bool passed = first_failure.empty();
    char line[160];
    if (entries == 0) {
      ++not_differentiable;
      std::snprintf(line, sizeof line, "%-16s  n/a (no differentiable input)", op->name.c_str());
    } else {
      ++checked;
      std::snprintf(line, sizeof line, "%-16s  max rel error %.2e  %-4s  (%lld Jacobian entries)",
                    op->name.c_str(), worst, passed ? "ok" : "FAIL", static_cast<long long>(entries));
    }
    std::cout << line << "\n";
    if (!passed) {
      ++failed;
      std::cout << "    worst entry: " << first_failure << "\n";
    }
  }
  std::cout << "gradcheck: " << checked - failed << " of " << checked << " ops passed (tolerance "
            << options.tolerance << ")";
  if (not_differentiable) std::cout << ", " << not_differentiable << " without gradient";
  std::cout << "\n";
  return failed == 0 ? 0 : 1;
}

}  // namespace pens::cli
