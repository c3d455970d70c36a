#include "autodiff/gradcheck.h"

#include <cmath>

#include "autodiff/tape.h"
#include "ops/check_case.h"
#include "ops/ir/error.h"
#include "ops/op.h"

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
  std::vector<std::vector<double>> analytic;
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

  // Numeric Jacobian, one column per variable element, compared as it is computed.
  int64_t column = 0;
  for (const Variable& var : variables) {
    for (int64_t i = 0; i < var.size; ++i, ++column) {
      const double saved = var.data[i];
      const double h = options.step * std::max(1.0, std::abs(saved));
      var.data[i] = saved + h;
      const std::vector<double> plus = evaluate(tape, targets);
      var.data[i] = saved - h;
      const std::vector<double> minus = evaluate(tape, targets);
      var.data[i] = saved;
      for (size_t row = 0; row < plus.size(); ++row) {
        const double numeric = (plus[row] - minus[row]) / (2.0 * h);
        const double exact = analytic[row][static_cast<size_t>(column)];
        const double scale = std::max({std::abs(exact), std::abs(numeric), options.floor});
        double error = std::abs(exact - numeric) / scale;
        if (std::isnan(error)) error = INFINITY;
        ++result.entries;
        result.nonzero += exact != 0.0;
        if (result.worst.empty() || error > result.max_error) {
          result.max_error = error;
          result.worst = cat("d target[", row, "] / d ", var.name, "[", i, "]: analytic ", exact,
                             ", numeric ", numeric);
        }
      }
    }
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

}  // namespace pens
