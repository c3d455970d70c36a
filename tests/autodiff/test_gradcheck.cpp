// End-to-end gradient checks of whole models, not just single ops.
#include <doctest/doctest.h>

#include "autodiff/gradcheck.h"
#include "models/mlp.h"

using namespace pens;

namespace {
std::map<std::string, std::vector<double>> labels_for(int64_t batch, int64_t classes) {
  std::vector<double> y;
  for (int64_t i = 0; i < batch; ++i) y.push_back(static_cast<double>((i * 7) % classes));
  return {{"y", y}};
}
}  // namespace

TEST_CASE("gradient of a 2-hidden-layer MLP's loss with respect to every parameter") {
  // Weights large enough for every unit to matter, ReLU kinks are measure-zero.
  const Graph g = build_mlp({.layers = {6, 5, 4, 3}, .weight_std = 0.7, .hidden_bias = 0.1});
  GradcheckOptions options;
  options.batch = 4;
  const GradcheckResult r = gradcheck(g, labels_for(4, 3), options);
  INFO(r.worst);
  CHECK(r.passed);
  CHECK(r.variables == 6 * 5 + 5 + 5 * 4 + 4 + 4 * 3 + 3 + 4 * 6);  // parameters and the input x
  CHECK(r.targets == 1);
  CHECK(r.max_error < 1e-6);
}

TEST_CASE("gradient of the dropout MLP and of the squared-hinge loss, noise frozen by key") {
  for (const char* loss : {"softmax_xent", "squared_hinge"}) {
    INFO(loss);
    const Graph g = build_mlp({.layers = {6, 5, 4, 3},
                               .input_dropout = 0.2,
                               .hidden_dropout = 0.5,
                               .weight_std = 0.7,
                               .loss = loss});
    GradcheckOptions options;
    options.batch = 5;
    const GradcheckResult r = gradcheck(g, labels_for(5, 3), options);
    INFO(r.worst);
    CHECK(r.passed);
  }
}

TEST_CASE("a frozen parameter is not a variable of the check") {
  Graph g = build_mlp({.layers = {4, 3, 2}, .weight_std = 0.5});
  g.set_flag(g.at("W1"), kFrozen);
  GradcheckOptions options;
  options.batch = 2;
  const GradcheckResult r = gradcheck(g, labels_for(2, 2), options);
  CHECK(r.passed);
  CHECK(r.variables == 3 + 3 * 2 + 2 + 2 * 4);
}
