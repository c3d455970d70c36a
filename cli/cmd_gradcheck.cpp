#include <algorithm>
#include <cstdio>
#include <iostream>

#include "autodiff/gradcheck.h"
#include "cli/args.h"
#include "ops/registry.h"

namespace pens::cli {

int run_gradcheck(const std::vector<std::string>& argv) {
  const Args args(argv, {"all-ops"}, {"op"});
  if (!args.positional().empty()) {
    fail("model files are read once the model-file format exists; use --all-ops or --op NAME");
  }
  std::vector<const OpDef*> ops;
  if (args.flag("all-ops")) {
    ops = OpRegistry::global().all();
  } else if (auto name = args.option("op")) {
    ops.push_back(&OpRegistry::global().at(*name));
  } else {
    fail("nothing to check: give --all-ops or --op NAME");
  }
  const GradcheckOptions options;
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
