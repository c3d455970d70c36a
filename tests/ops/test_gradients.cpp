// Every op's vector-Jacobian product against central differences, in double precision.
#include <doctest/doctest.h>

#include <cmath>

#include "pens/autodiff/gradcheck.h"
#include "pens/autodiff/tape.h"
#include "pens/ops/check_case.h"
#include "pens/ops/registry.h"

namespace test_gradients {

using namespace pens;

namespace {
bool has_differentiable_input(const OpDef& op) {
  for (const InputSlot& s : op.inputs) {
    if (s.differentiable) return true;
  }
  return op.name == "input" || op.name == "parameter";  // leaves checked as themselves
}
}  // namespace

TEST_CASE("every registered op has gradient-check cases that check something") {
  const auto ops = OpRegistry::global().all();
  CHECK(ops.size() >= 25);
  for (const OpDef* op : ops) {
    INFO("op " << op->name);
    const auto results = gradcheck_op(*op);
    // A probe is computed by the tape from its body, not by a kernel, and passes no
    // gradient: tests/autodiff/test_probe.cpp checks its value by finite differences.
    if (op->name == "probe") continue;
    CHECK_MESSAGE(!results.empty(), "op has no gradient-check case");
    int64_t entries = 0, nonzero = 0;
    for (const auto& r : results) {
      entries += r.result.entries;
      nonzero += r.result.nonzero;
    }
    if (has_differentiable_input(*op)) {
      CHECK_MESSAGE(entries > 0, "op has differentiable inputs but its cases compare no Jacobian entry");
      CHECK_MESSAGE(nonzero > 0, "every Jacobian entry its cases compare is 0");
    }
  }
}

TEST_CASE("every op's gradient matches central differences (double precision)") {
  for (const OpDef* op : OpRegistry::global().all()) {
    for (const OpCheckResult& r : gradcheck_op(*op)) {
      INFO(r.label << ": " << r.result.worst);
      CHECK(r.result.passed);
      CHECK(r.result.max_error <= 1e-6);
    }
  }
}

TEST_CASE("stochastic ops are checked on draws that matter, and replay them") {
  int checked = 0;
  for (const OpDef* op : OpRegistry::global().all()) {
    if (!op->stochastic || !has_differentiable_input(*op)) continue;
    for (const CheckCase& c : check_cases(*op)) {
      INFO(c.label);
      const CheckGraph cg = check_graph(*op, c);
      const GradcheckOptions options;
      const auto output = [&](NoiseKey key) {
        ParamStore<double> params(cg.graph);
        Tape<double> tape(cg.graph, params, {.batch = 2});
        for (const auto& [name, vals] : cg.values) std::copy(vals.begin(), vals.end(), params.value(name).data);
        tape.set_noise_key(key);
        tape.forward();
        const auto out = tape.value("out");
        return std::vector<double>(out.data, out.data + out.size());
      };
      // The draw at the checker's key replays, and another key draws differently.
      CHECK(output(options.key) == output(options.key));
      CHECK(output(options.key) != output({options.key.seed, options.key.step + 1}));
      const GradcheckResult r = gradcheck(cg.graph, cg.values, options);
      CHECK(r.passed);
      if (op->name == "dropout") {
        // The masks kept some units and dropped others: the Jacobian's diagonal holds both
        // zeros and the kept units' scale, so the check compared both cases.
        const int64_t units = r.variables;
        CHECK(r.nonzero > 0);
        CHECK(r.nonzero < units);
      }
      ++checked;
    }
  }
  CHECK(checked >= 3);  // dropout's two cases and gaussian_noise's
}

namespace {
// relu whose derivative is off by a factor of two: the checker must notice.
struct BrokenRelu {
  static constexpr const char* kName = "test_broken_relu";
  static constexpr const char* kSummary = "relu with a wrong gradient (tests only)";
  static std::vector<InputSlot> inputs() { return {{"x"}}; }
  static ValueInfo infer(const InferCtx& ctx) { return ctx.in[0]; }
  template <class T>
  static void forward(const KernelArgs<T>& args) {
    args.out.arr() = args.in[0].arr().max(T(0));
  }
  template <class T>
  static void backward(const KernelArgs<T>& args) {
    args.gin[0].arr() += T(2) * args.gout.arr() * (args.in[0].arr() > T(0)).template cast<T>();
  }
  static void check(CheckBuilder& b) { b.check({b.real({2, 3}, away_from(-1, 1, {0}, 0.1))}); }
};
}  // namespace

TEST_CASE("the gradient checker fails a wrong gradient and says where") {
  if (!OpRegistry::global().find(BrokenRelu::kName)) OpRegistry::register_global<BrokenRelu>();
  const auto results = gradcheck_op(OpRegistry::global().at(BrokenRelu::kName));
  REQUIRE(results.size() == 1);
  CHECK_FALSE(results[0].result.passed);
  CHECK(results[0].result.max_error > 0.1);
  CHECK(results[0].result.worst.find("analytic") != std::string::npos);
}

TEST_CASE("float and double kernels compute the same values") {
  for (const OpDef* op : OpRegistry::global().all()) {
    if (op->name.rfind("test_", 0) == 0) continue;
    for (const CheckCase& c : check_cases(*op)) {
      INFO(c.label);
      const CheckGraph cg = check_graph(*op, c);
      ParamStore<double> pd(cg.graph);
      ParamStore<float> pf(cg.graph);
      Tape<double> td(cg.graph, pd, {.batch = 2});
      Tape<float> tf(cg.graph, pf, {.batch = 2});
      for (const auto& [name, vals] : cg.values) {
        const bool param = pd.find(name) != nullptr;
        double* d = param ? pd.value(name).data : td.input(name).data;
        float* f = param ? pf.value(name).data : tf.input(name).data;
        for (size_t i = 0; i < vals.size(); ++i) {
          d[i] = vals[i];
          f[i] = static_cast<float>(vals[i]);
        }
      }
      td.set_noise_key({5, 9});
      tf.set_noise_key({5, 9});
      td.forward();
      tf.forward();
      const auto yd = td.value("out");
      const auto yf = tf.value("out");
      REQUIRE(yd.size() == yf.size());
      for (int64_t i = 0; i < yd.size(); ++i) {
        CHECK(std::abs(yd[i] - yf[i]) <= 1e-5 * std::max(1.0, std::abs(yd[i])));
      }
    }
  }
}

}  // namespace test_gradients
