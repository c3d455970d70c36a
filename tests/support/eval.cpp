#include "tests/support/eval.h"

#include <algorithm>
#include <random>

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

Values random_params(const Graph& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  Values v;
  for (NodeId n : g.nodes()) {
    if (!is_param(g[n])) continue;
    int64_t size = 1;
    for (int64_t d : g[n].attrs.get_ints("shape")) size *= d;
    for (int64_t i = 0; i < size; ++i) v[g[n].name].push_back(u(rng));
  }
  return v;
}

}  // namespace pens::testing
