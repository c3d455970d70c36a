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
#include "pens/train/optim/optimizer.h"

namespace pens {

class Constraint {
 public:
  virtual ~Constraint() = default;
  // After an update; parameters in `held` were not updated and are left as they are.
  virtual void apply(std::span<const ParamEntry* const> held) = 0;
  // optimizer.step(s) then apply(held), in one pass over the values where the constraint
  // can: the same bits, each block read again while it is in cache. Returns false, having
  // done nothing, where it cannot (the optimizer is not elementwise, or the constraint
  // does not know how).
  virtual bool update_and_apply(Optimizer& optimizer, const OptimizerStep& s, std::span<const ParamEntry* const> held) {
    (void)optimizer, (void)s, (void)held;
    return false;
  }
};

// An optimizer's update and then the constraints (parameters in `held` skipped by them):
// fused where the one constraint can (Constraint::update_and_apply), else one pass each.
void update_and_constrain(Optimizer& optimizer, const OptimizerStep& s,
                          std::span<const std::unique_ptr<Constraint>> constraints,
                          std::span<const ParamEntry* const> held);

enum class MaxNormRule { UnitIncoming, InputOutgoingSquared };

// "unit-incoming" | "input-outgoing-squared"; anything else is an Error.
MaxNormRule parse_max_norm_rule(const std::string& name);

class MaxNorm : public Constraint {
 public:
  // Reads the max_norm attributes of the model's parameter nodes (an Error for one that
  // is not a matrix).
  MaxNorm(const Graph& model, ParamStore<float>& params, MaxNormRule rule);
  void apply(std::span<const ParamEntry* const> held) override;
  // The update of a bounded matrix runs in the blocks the constraint scales (whole
  // columns, or whole rows), the rest of the store in ranges: the rule reads each block's
  // new values from cache instead of memory (a pass over every weight, 6 % of a
  // bfloat16 PEA step before).
  bool update_and_apply(Optimizer& optimizer, const OptimizerStep& s, std::span<const ParamEntry* const> held) override;
  bool empty() const { return bounds_.empty(); }

 private:
  struct Bound {
    const ParamEntry* param;
    double max_norm;
    Eigen::Array<float, 1, Eigen::Dynamic> column_norms;  // the unit-incoming rule's work space
  };
  // Whole columns of one matrix, which the unit-incoming rule computes on their own.
  struct Columns {
    Bound* bound;
    int64_t first, count;
  };
  // The rule on every bounded matrix not in `held`; before_read(param, first, n) runs on
  // each stretch of a matrix (its elements first .. first + n - 1, row-major) right before
  // the rule reads it (the fused update, or nothing).
  template <class BeforeRead>
  void constrain(std::span<const ParamEntry* const> held, const BeforeRead& before_read);

  ParamStore<float>& params_;
  MaxNormRule rule_;
  std::vector<Bound> bounds_;  // in store order, as the store's entries are
  std::vector<Columns> columns_;  // a step's blocks of columns, kept so that a step allocates nothing
};

// The constraints a model's parameters declare: max-norm by `rule` where any has one.
std::vector<std::unique_ptr<Constraint>> model_constraints(const Graph& model, ParamStore<float>& params,
                                                           MaxNormRule rule);

}  // namespace pens
