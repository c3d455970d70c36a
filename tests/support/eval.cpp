#include "tests/support/eval.h"

#include <algorithm>

#include <doctest/doctest.h>

#include "pens/autodiff/tape.h"

namespace pens::testing {

std::vector<double> evaluate(const Graph& g, const Values& values, const std::string& out,
                             int64_t batch, NoiseKey key) {
  ParamStore<double> params(g);
  params.initialize(g, 1);
  Tape<double> tape(g, params, {.batch = batch});
  // Not a structured binding: doctest's message captures `name` in a lambda, which
  // clang before 16 cannot do with a binding.
  for (const auto& entry : values) {
    const std::string& name = entry.first;
    const std::vector<double>& vals = entry.second;
    TensorView<double> dst = params.find(name) ? params.value(name) : tape.input(name);
    REQUIRE_MESSAGE(static_cast<int64_t>(vals.size()) == dst.size(), "values for " << name);
    std::copy(vals.begin(), vals.end(), dst.data);
  }
  tape.set_noise_key(key);
  tape.forward();
  const auto v = tape.value(out);
  return {v.data, v.data + v.size()};
}

}  // namespace pens::testing
