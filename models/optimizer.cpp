#include "models/optimizer.h"

#include <cmath>

#include "graph/error.h"

namespace pens {

Sgd::Sgd(const Graph& model, ParamStore<float>& params)
    : params_(params), velocity_(params.values().size(), 0.0f) {
  for (const ParamEntry& e : params.entries()) {
    const Attributes& a = model[e.name].attrs;
    if (!a.has("max_norm")) continue;
    if (e.shape.rank != 2) {
      fail("parameter '", e.name, "': max_norm needs a matrix, the shape is ", e.shape.str());
    }
    constraints_.push_back({&e, a.get_float("max_norm")});
  }
}

void Sgd::step(double learning_rate, double momentum) {
  const auto mu = static_cast<float>(momentum);
  const auto eta = static_cast<float>(learning_rate);
  float* theta = params_.values().data();
  const float* g = params_.grads().data();
  float* m = velocity_.data();
  for (size_t i = 0, n = velocity_.size(); i < n; ++i) {
    m[i] = mu * m[i] + (1.0f - mu) * g[i];
    theta[i] -= eta * m[i];
  }
  for (const Constraint& c : constraints_) {
    auto w = params_.value(*c.param).mat();
    for (int64_t j = 0; j < w.cols(); ++j) {
      const double norm = w.col(j).norm();
      if (norm > c.max_norm) w.col(j) *= static_cast<float>(c.max_norm / norm);
    }
  }
}

}  // namespace pens
