// Schedules: the values of a training run that follow training time t, in fractional
// epochs: the learning rate (linear warm-up, exponential decay, linear annealing to
// zero), the momentum (a linear ramp) and the scale of every penalty's λ (stages). A
// run may restart its optimizer at given epochs, as the authors' code does by calling
// its trainer once per λ stage: the warm-up, decay and momentum ramp then count from
// the restart, at the restart's own base learning rate, and the trainer resets the
// optimizer's state there.
#pragma once

#include <optional>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/train/optim/optimizer.h"

namespace pens {

// The optimizer starts afresh at `epoch`, from base learning rate `learning_rate` (the
// schedule's own when not given).
struct Restart {
  double epoch = 0;
  std::optional<double> learning_rate = {};
  bool operator==(const Restart&) const = default;
};

struct Schedule {
  // η_t = η₀ · min(1, τ / warmup_epochs) · decay^δ · anneal(τ), with τ = t − the last
  // restart at or before t (0 without one), δ = t − the later of that restart and
  // decay_start_epoch (0 before it), and η₀ that restart's learning rate (else
  // learning_rate); anneal is 1 up to anneal_start_epoch, falls linearly to 0 at
  // anneal_end_epoch and stays 0 (the ladder paper's schedule); off while the end is 0.
  // The authors' tree runs: decay 0.99 from epoch 250, after their last restart.
  double learning_rate = 0.1;
  double warmup_epochs = 0;
  double decay = 1;
  double decay_start_epoch = 0;
  double anneal_start_epoch = 0;
  double anneal_end_epoch = 0;
  // μ_t = momentum_start → momentum_end linearly over momentum_epochs of τ
  double momentum_start = 0;
  double momentum_end = 0;
  double momentum_epochs = 0;
  // λ_t = λ · the scale of the stage t falls in (the last stage holds); 1 without stages
  std::vector<LambdaStage> lambda_stages = {};
  // In increasing epochs, each > 0.
  std::vector<Restart> restarts = {};

  double learning_rate_at(double epoch) const;
  double momentum_at(double epoch) const;
  double lambda_scale_at(double epoch) const;
  // The epoch the optimizer's clock counts from at `epoch`: the last restart at or before
  // it, else 0.
  double origin_at(double epoch) const;
  // The optimizer's view of an update made at `epoch`, the `step`-th since the optimizer
  // (re)started (Adam's bias corrections count from it).
  OptimizerStep at(int64_t step, double epoch) const;
};

// Restarts every `every` epochs (epochs every, 2·every, ...) below epoch `before` (0: no
// limit) within a run of `epochs`; none when every is 0. The authors' tree runs restart
// AdaGrad every 9 epochs before epoch 250.
std::vector<Restart> periodic_restarts(int64_t every, int64_t before, int64_t epochs);

// The schedule at one step of a run of `steps_per_epoch` steps per epoch: how every kind
// of run reads its schedule, restarts included.
struct PlannedStep {
  double epoch = 0;
  double lambda_scale = 1;
  bool restart = false;  // the optimizer forgets its updates before this step
  OptimizerStep update;  // the step since the last restart, η, μ, the epoch
};
PlannedStep planned_step(const Schedule& schedule, int64_t step, int64_t steps_per_epoch);

// A penalty's λ at a scale of the λ stages: its weight times `scale` where the stages
// schedule it, the weight alone otherwise.
double penalty_weight(const PenaltyHandle& penalty, double scale);

// Writes the λ constants of `penalties` on a tape (penalty_weight).
void set_penalty_weights(Tape<float>& tape, const std::vector<PenaltyHandle>& penalties, double scale);

// Keeps the λ constants of a pseudo-ensemble's penalties on a tape at their weights
// times a scale (the scheduled ones; the others at their weights), writing them only when
// the scale changes.
class PenaltyWeights {
 public:
  explicit PenaltyWeights(std::vector<PenaltyHandle> penalties) : penalties_(std::move(penalties)) {}
  void set(Tape<float>& tape, double scale);

 private:
  std::vector<PenaltyHandle> penalties_;
  double scale_ = -1;
};

}  // namespace pens
