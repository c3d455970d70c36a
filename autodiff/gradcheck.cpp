#include "pens/autodiff/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "pens/autodiff/tape.h"
#include "pens/graph/infer.h"
#include "pens/ops/check_case.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/op.h"

namespace pens {

namespace {

struct Variable {
  std::string name;
  double* data;
  int64_t size;
};

struct Target {
  std::string name;  // empty: the objective
  int64_t size;
};

// Evaluates all targets into one flat vector.
std::vector<double> evaluate(Tape<double>& tape, const std::vector<Target>& targets) {
  tape.forward();
  std::vector<double> out;
  for (const Target& t : targets) {
    if (t.name.empty()) {
      out.push_back(tape.objective());
    } else {
      auto v = tape.value(t.name);
      out.insert(out.end(), v.data, v.data + v.size());
    }
  }
  return out;
}

// Halvings of h an entry may be refined by (h/16 at most: below that, roundoff in double
// precision approaches the default tolerance).
constexpr int kLevels = 4;

using Jacobian = std::vector<std::vector<double>>;  // [target element][variable element]

// The elements of `var` to perturb (see `sample` in gradcheck.h), in increasing order;
// its gradients are the Jacobian's columns from `first_column` on.
std::vector<int64_t> choose_elements(const Variable& var, int64_t first_column, const Jacobian& analytic,
                                     const GradcheckOptions& options) {
  std::vector<int64_t> all(static_cast<size_t>(var.size));
  std::iota(all.begin(), all.end(), 0);
  if (options.sample <= 0 || var.size <= options.sample) return all;
  const auto magnitude = [&](int64_t i) {
    double m = 0;
    for (const auto& row : analytic) m = std::max(m, std::abs(row[static_cast<size_t>(first_column + i)]));
    return m;
  };
  std::vector<char> taken(all.size(), 0);
  std::vector<int64_t> out;
  const auto take = [&](int64_t i) {
    if (!taken[static_cast<size_t>(i)]) {
      taken[static_cast<size_t>(i)] = 1;
      out.push_back(i);
    }
  };
  const int64_t largest = std::max<int64_t>(1, options.sample / 4);
  std::partial_sort(all.begin(), all.begin() + largest, all.end(),
                    [&](int64_t a, int64_t b) { return magnitude(a) > magnitude(b); });
  for (int64_t k = 0; k < largest; ++k) take(all[static_cast<size_t>(k)]);

  uint64_t counter = 0;
  const uint64_t stream = mix64(options.sample_seed ^ hash_name(var.name));
  const auto random_below = [&](size_t n) { return static_cast<size_t>(mix64(stream + counter++) % n); };
  std::vector<int64_t> zeros;
  for (int64_t i = 0; i < var.size; ++i) {
    if (var.data[i] == 0.0 && !taken[static_cast<size_t>(i)]) zeros.push_back(i);
  }
  const int64_t zero_count = std::min<int64_t>(options.sample / 8, static_cast<int64_t>(zeros.size()));
  for (size_t k = 0; k < static_cast<size_t>(zero_count); ++k) {  // a partial Fisher-Yates shuffle
    std::swap(zeros[k], zeros[k + random_below(zeros.size() - k)]);
    take(zeros[k]);
  }
  while (static_cast<int64_t>(out.size()) < options.sample) {
    take(static_cast<int64_t>(random_below(static_cast<size_t>(var.size))));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

GradcheckResult gradcheck(const Graph& g, const std::map<std::string, std::vector<double>>& values,
                          const GradcheckOptions& options) {
  ParamStore<double> params(g);
  params.initialize(g, options.init_seed);
  Tape<double> tape(g, params, {.batch = options.batch, .grad_inputs = true});
  tape.set_noise_key(options.key);

  std::vector<Variable> variables;
  NoiseStream fill(NoiseKey{options.init_seed, 0}, hash_name("gradcheck inputs"));
  for (NodeId v : g.topological_order()) {
    const Node& n = g[v];
    if (!is_param(n) && !is_input(n)) continue;
    double* data = is_param(n) ? params.value(n.name).data : tape.input(n.name).data;
    const int64_t size = tape.info(n.name).shape.numel();
    auto given = values.find(n.name);
    if (given != values.end()) {
      if (static_cast<int64_t>(given->second.size()) != size) {
        fail("gradcheck: '", n.name, "' needs ", size, " values, got ", given->second.size());
      }
      std::copy(given->second.begin(), given->second.end(), data);
    } else if (is_input(n)) {
      if (tape.info(n.name).dtype == DType::Index) {
        fail("gradcheck: index input '", n.name, "' needs values");
      }
      for (int64_t i = 0; i < size; ++i) data[i] = 2.0 * fill.uniform(static_cast<uint64_t>(i)) - 1.0;
    }
    const bool trainable = is_param(n) ? !n.has(kFrozen)
                                       : options.inputs && tape.info(n.name).dtype == DType::Real;
    if (trainable) variables.push_back({n.name, data, size});
  }

  std::vector<Target> targets;
  if (g.nodes_with(kLoss).empty()) {
    for (NodeId v : g.nodes_with(kOutput)) targets.push_back({g[v].name, tape.info(g[v].name).shape.numel()});
    if (targets.empty()) fail("gradcheck: the graph has neither loss nor output nodes");
  } else {
    targets.push_back({"", 1});
  }

  GradcheckResult result;
  for (const Variable& var : variables) result.variables += var.size;
  for (const Target& t : targets) result.targets += t.size;

  // Analytic Jacobian, one row per target element.
  Jacobian analytic;
  evaluate(tape, targets);  // backward needs the forward values
  for (const Target& t : targets) {
    for (int64_t e = 0; e < t.size; ++e) {
      params.zero_grad();
      if (t.name.empty()) {
        tape.backward();
      } else {
        std::vector<double> seed(static_cast<size_t>(t.size), 0.0);
        seed[static_cast<size_t>(e)] = 1.0;
        tape.backward_from(t.name, seed);
      }
      std::vector<double> row;
      for (const Variable& var : variables) {
        auto grad = tape.grad(var.name);
        for (int64_t i = 0; i < var.size; ++i) row.push_back(grad ? grad.data[i] : 0.0);
      }
      analytic.push_back(std::move(row));
    }
  }

  // Numeric Jacobian, column by column for the chosen elements, compared as computed.
  std::vector<std::vector<int64_t>> chosen;
  int64_t first_column = 0;
  for (const Variable& var : variables) {
    chosen.push_back(choose_elements(var, first_column, analytic, options));
    result.checked += static_cast<int64_t>(chosen.back().size());
    first_column += var.size;
  }
  // The central difference of every target at h around element i of var.
  const auto central = [&](const Variable& var, int64_t i, double h) {
    const double saved = var.data[i];
    var.data[i] = saved + h;
    std::vector<double> d = evaluate(tape, targets);
    var.data[i] = saved - h;
    const std::vector<double> minus = evaluate(tape, targets);
    var.data[i] = saved;
    for (size_t row = 0; row < d.size(); ++row) d[row] = (d[row] - minus[row]) / (2.0 * h);
    return d;
  };
  const auto error_of = [&](double exact, double numeric) {
    const double scale = std::max({std::abs(exact), std::abs(numeric), options.floor});
    const double error = std::abs(exact - numeric) / scale;
    return std::isnan(error) ? INFINITY : error;
  };
  // Ridders' extrapolation for an entry whose plain difference misses: central
  // differences at h/2, h/4, ... combined into a Richardson table; the estimate taken is
  // the table's with the smallest internal error (the spread between it and the two
  // estimates it was made of). Refinement stops after kLevels halvings, or earlier when
  // roundoff makes the estimates spread again.
  const auto extrapolate = [&](const Variable& var, int64_t i, double h, const std::vector<double>& plain) {
    std::vector<std::vector<double>> previous = {plain};  // previous[j]: the table's row above
    std::vector<double> best = plain;
    double best_error = INFINITY;
    for (int level = 1; level <= kLevels; ++level) {
      std::vector<std::vector<double>> current = {central(var, i, h / std::pow(2.0, level))};
      double level_error = INFINITY;
      for (int j = 1; j <= level; ++j) {
        const double factor = std::pow(4.0, j);
        std::vector<double> r(plain.size());
        double spread = 0;  // how far this estimate is from the two it was made of
        for (size_t row = 0; row < r.size(); ++row) {
          r[row] = (factor * current[j - 1][row] - previous[j - 1][row]) / (factor - 1);
          spread = std::max({spread, std::abs(r[row] - current[j - 1][row]), std::abs(r[row] - previous[j - 1][row])});
        }
        if (spread <= best_error) {
          best_error = spread;
          best = r;
        }
        level_error = std::min(level_error, spread);
        current.push_back(std::move(r));
      }
      if (level_error > 2 * best_error) break;  // roundoff has taken over
      previous = std::move(current);
    }
    return best;
  };
  int64_t done = 0;
  first_column = 0;
  for (size_t v = 0; v < variables.size(); ++v) {
    const Variable& var = variables[v];
    for (const int64_t i : chosen[v]) {
      const size_t column = static_cast<size_t>(first_column + i);
      const double h = options.step * std::max(1.0, std::abs(var.data[i]));
      const std::vector<double> plain = central(var, i, h);
      std::vector<double> plain_error(plain.size());
      bool missed = false;
      for (size_t row = 0; row < plain.size(); ++row) {
        plain_error[row] = error_of(analytic[row][column], plain[row]);
        result.max_plain_error = std::max(result.max_plain_error, plain_error[row]);
        missed = missed || plain_error[row] > options.tolerance;
      }
      const std::vector<double> numeric = missed ? extrapolate(var, i, h, plain) : plain;
      for (size_t row = 0; row < plain.size(); ++row) {
        const double exact = analytic[row][column];
        const double error = error_of(exact, numeric[row]);
        ++result.entries;
        result.nonzero += exact != 0.0;
        result.truncated += plain_error[row] > options.tolerance && error <= options.tolerance;
        if (result.worst.empty() || error > result.max_error) {
          result.max_error = error;
          result.worst = cat("d target[", row, "] / d ", var.name, "[", i, "]: analytic ", exact, ", numeric ",
                             numeric[row], missed ? cat(" (extrapolated; ", plain[row], " at h)") : std::string());
        }
      }
      if (options.progress) options.progress(++done, result.checked);
    }
    first_column += var.size;
  }
  result.passed = result.max_error <= options.tolerance;
  return result;
}

CheckGraph check_graph(const OpDef& op, const CheckCase& c) {
  CheckGraph out;
  Graph& g = out.graph;
  std::vector<NodeId> leaves;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const CheckInput& in = c.inputs[i];
    if (in.dtype == DType::Real) {
      const std::string name = cat("x", i);
      leaves.push_back(g.param(name, in.shape));
      out.values[name] = in.values;
      // A real input the op passes no gradient to (stop_gradient's) is held fixed: finite
      // differences would see the value it forwards move.
      bool differentiable = false;
      for (size_t a = 0; a < c.args.size(); ++a) differentiable = differentiable || (c.args[a] == i && op.differentiable(a));
      if (!differentiable) g.set_flag(leaves.back(), kFrozen);
    } else {
      leaves.push_back(g.add("constant", {},
                             {{"shape", in.shape.to_vector()}, {"dtype", std::string("index")}, {"values", in.values}},
                             cat("i", i)));
    }
  }
  std::vector<NodeId> args;
  for (size_t a : c.args) args.push_back(leaves.at(a));
  g.set_flag(g.add(op.name, args, c.attrs, "out"), kOutput);
  if (!c.leaf_values.empty()) out.values["out"] = c.leaf_values;
  return out;
}

std::vector<OpCheckResult> gradcheck_op(const OpDef& op, const GradcheckOptions& options) {
  std::vector<OpCheckResult> out;
  for (const CheckCase& c : check_cases(op)) {
    const CheckGraph cg = check_graph(op, c);
    out.push_back({c.label, gradcheck(cg.graph, cg.values, options)});
  }
  return out;
}

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

int64_t default_sample(const Graph& g, int64_t batch) {
  constexpr int64_t kSampleAbove = 10000;
  constexpr int64_t kDefaultSample = 64;
  const std::vector<ValueInfo> values = infer_values(g, batch);
  int64_t parameters = 0;
  for (NodeId v : g.nodes()) parameters += is_param(g[v]) ? values[v].shape.numel() : 0;
  return parameters > kSampleAbove ? kDefaultSample : 0;
}

}  // namespace pens
