#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

#include "autodiff/gradcheck.h"
#include "cli/args.h"
#include "cli/ensemble_args.h"
#include "graph/infer.h"
#include "ops/registry.h"
#include "serialization/model_file.h"

namespace pens::cli {

namespace {

// Labels for the index inputs of a model: row i gets class i mod C, C read off the
// scores the labels are compared with (0 when no consumer says how many there are).
std::map<std::string, std::vector<double>> label_values(const Graph& g, int64_t batch) {
  const std::vector<ValueInfo> values = infer_values(g, batch);
  std::map<std::string, std::vector<double>> out;
  for (NodeId v : g.nodes()) {
    if (!is_input(g[v]) || values[v].dtype != DType::Index) continue;
    int64_t classes = 1;
    for (NodeId c : g.consumers(v)) {
      const std::vector<NodeId> inputs = g.inputs(c);
      for (size_t slot = 0; slot < inputs.size(); ++slot) {
        if (inputs[slot] == v && g[c].op->slot(slot).name == "labels") classes = values[inputs[0]].shape.cols();
      }
    }
    std::vector<double>& y = out[g[v].name];
    for (int64_t i = 0; i < values[v].shape.numel(); ++i) y.push_back(static_cast<double>(i % classes));
  }
  return out;
}

int check_model(const Args& args) {
  const std::string& path = args.one_positional("a model file");
  const Model model = load_model(path);
  const BuiltGraph built = build_for_cli(model, args);
  GradcheckOptions options;
  options.batch = built.batch;
  options.inputs = false;
  options.tolerance = args.option_double("tolerance", options.tolerance);
  options.step = args.option_double("step", options.step);
  options.init_seed = static_cast<uint64_t>(args.option_int("init-seed", 1));
  const GradcheckResult r = gradcheck(built.graph, label_values(built.graph, built.batch), options);
  std::cout << path << ": d objective / d parameters, " << r.variables << " parameter elements, "
            << (built.ensemble ? cat(built.ensemble->spec.children, " children, ") : std::string())
            << "batch " << built.batch << "\n";
  char line[200];
  std::snprintf(line, sizeof line, "max rel error %.2e (tolerance %.0e): %s", r.max_error, options.tolerance,
                r.passed ? "ok" : "FAIL");
  std::cout << line << "\n";
  if (!r.passed) std::cout << "worst entry: " << r.worst << "\n";
  return r.passed ? 0 : 1;
}

}  // namespace

int run_gradcheck(const std::vector<std::string>& argv) {
  std::vector<std::string> known = kEnsembleOptions;
  for (const char* o : {"op", "tolerance", "step", "init-seed"}) known.push_back(o);
  const Args args(argv, {"all-ops", "parent"}, known);
  if (!args.positional().empty()) return check_model(args);
  std::vector<const OpDef*> ops;
  if (args.flag("all-ops")) {
    ops = OpRegistry::global().all();
  } else if (auto name = args.option("op")) {
    ops.push_back(&OpRegistry::global().at(*name));
  } else {
    fail("nothing to check: give a model file, --all-ops or --op NAME");
  }
  GradcheckOptions options;
  options.tolerance = args.option_double("tolerance", options.tolerance);
  options.step = args.option_double("step", options.step);
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
