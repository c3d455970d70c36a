// SGD with momentum, in the form of the authors' code: m ← μ m + (1 − μ) g,
// θ ← θ − η m; then each parameter with a max_norm attribute c is constrained, by one of
// two rules (a weight matrix is [inputs, units]):
//   unit-incoming (the paper): each column, a unit's incoming weights, has L2 norm <= c;
//   input-outgoing-squared (the authors' code): each row, an input's outgoing weights,
//   has squared L2 norm <= c.
#pragma once

#include <Eigen/Core>
#include <span>
#include <string>
#include <vector>

#include "autodiff/param_store.h"
#include "graph/graph.h"

namespace pens {

enum class MaxNormRule { UnitIncoming, InputOutgoingSquared };

// "unit-incoming" | "input-outgoing-squared"; anything else is an Error.
MaxNormRule parse_max_norm_rule(const std::string& name);

class Sgd {
 public:
  // Reads the max_norm constraints from the model's parameter nodes.
  Sgd(const Graph& model, ParamStore<float>& params, MaxNormRule rule = MaxNormRule::UnitIncoming);

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
  MaxNormRule rule_;
  std::vector<float, Eigen::aligned_allocator<float>> velocity_;
  std::vector<Constraint> constraints_;
  Eigen::Array<float, 1, Eigen::Dynamic> column_scale_;  // per-column work space of the max-norm step
};

}  // namespace pens
