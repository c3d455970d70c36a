// SGD with momentum, in the form of the authors' code: m ← μ m + (1 − μ) g,
// θ ← θ − η m; then each parameter with a max_norm attribute has the columns of its
// matrix (the incoming weights of each unit) rescaled to at most that L2 norm.
#pragma once

#include <Eigen/Core>
#include <span>
#include <vector>

#include "autodiff/param_store.h"
#include "graph/graph.h"

namespace pens {

class Sgd {
 public:
  // Reads the max_norm constraints from the model's parameter nodes.
  Sgd(const Graph& model, ParamStore<float>& params);

  // One update from the gradients in the store (which it does not zero).
  void step(double learning_rate, double momentum);

  // The momentum buffer, laid out like the store's values (checkpoints save it).
  std::span<const float> state() const { return velocity_; }
  std::span<float> state() { return velocity_; }

 private:
  struct Constraint {
    const ParamEntry* param;
    double max_norm;
  };
  ParamStore<float>& params_;
  std::vector<float, Eigen::aligned_allocator<float>> velocity_;
  std::vector<Constraint> constraints_;
};

}  // namespace pens
