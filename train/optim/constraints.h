// Constraints on parameter values, applied after every optimizer update, whichever the
// optimizer. The one pens has is the max-norm constraint of the paper's MNIST networks:
// a parameter with a max_norm attribute c is rescaled by one of two rules (a weight
// matrix is [inputs, units]):
//   unit-incoming (the paper): each column, a unit's incoming weights, has L2 norm <= c;
//   input-outgoing-squared (the authors' code): each row, an input's outgoing weights,
//   has squared L2 norm <= c.
#pragma once

#include <Eigen/Core>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pens/autodiff/param_store.h"
#include "pens/graph/graph.h"

namespace pens {

class Constraint {
 public:
  virtual ~Constraint() = default;
  // After an update; parameters in `held` were not updated and are left as they are.
  virtual void apply(std::span<const ParamEntry* const> held) = 0;
};

enum class MaxNormRule { UnitIncoming, InputOutgoingSquared };

// "unit-incoming" | "input-outgoing-squared"; anything else is an Error.
MaxNormRule parse_max_norm_rule(const std::string& name);

class MaxNorm : public Constraint {
 public:
  // Reads the max_norm attributes of the model's parameter nodes (an Error for one that
  // is not a matrix).
  MaxNorm(const Graph& model, ParamStore<float>& params, MaxNormRule rule);
  void apply(std::span<const ParamEntry* const> held) override;
  bool empty() const { return bounds_.empty(); }

 private:
  struct Bound {
    const ParamEntry* param;
    double max_norm;
  };
  ParamStore<float>& params_;
  MaxNormRule rule_;
  std::vector<Bound> bounds_;
  Eigen::Array<float, 1, Eigen::Dynamic> column_scale_;  // per-column work space of the unit-incoming rule
};

// The constraints a model's parameters declare: max-norm by `rule` where any has one.
std::vector<std::unique_ptr<Constraint>> model_constraints(const Graph& model, ParamStore<float>& params,
                                                           MaxNormRule rule);

}  // namespace pens
