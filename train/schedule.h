// Schedules: the values of a training run that follow training time t, in fractional
// epochs: the learning rate (linear warm-up, then exponential decay), the momentum
// (a linear ramp) and the scale of every penalty's λ (stages).
#pragma once

#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/train/optimizer.h"

namespace pens {

struct Schedule {
  // η_t = learning_rate · min(1, t / warmup_epochs) · decay^t
  double learning_rate = 0.1;
  double warmup_epochs = 0;
  double decay = 1;
  // μ_t = momentum_start → momentum_end linearly over momentum_epochs
  double momentum_start = 0;
  double momentum_end = 0;
  double momentum_epochs = 0;
  // λ_t = λ · the scale of the stage t falls in (the last stage holds); 1 without stages
  std::vector<LambdaStage> lambda_stages = {};

  double learning_rate_at(double epoch) const;
  double momentum_at(double epoch) const;
  double lambda_scale_at(double epoch) const;
  // The optimizer's view of update `step`, made at `epoch`.
  OptimizerStep at(int64_t step, double epoch) const;
};

// Keeps the λ constants of a pseudo-ensemble's penalties on a tape at their weights
// times a scale, writing them only when the scale changes.
class PenaltyWeights {
 public:
  explicit PenaltyWeights(std::vector<PenaltyHandle> penalties) : penalties_(std::move(penalties)) {}
  void set(Tape<float>& tape, double scale);

 private:
  std::vector<PenaltyHandle> penalties_;
  double scale_ = -1;
};

}  // namespace pens
