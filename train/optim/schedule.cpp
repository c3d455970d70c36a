#include "pens/train/optim/schedule.h"

#include <algorithm>
#include <cmath>

namespace pens {

namespace {

// The last restart at or before `epoch`, or null.
const Restart* restart_at(const std::vector<Restart>& restarts, double epoch) {
  const Restart* last = nullptr;
  for (const Restart& r : restarts) {
    if (r.epoch > epoch) break;
    last = &r;
  }
  return last;
}

}  // namespace

double Schedule::origin_at(double epoch) const {
  const Restart* r = restart_at(restarts, epoch);
  return r ? r->epoch : 0.0;
}

double Schedule::learning_rate_at(double epoch) const {
  const Restart* r = restart_at(restarts, epoch);
  const double origin = r ? r->epoch : 0.0;
  const double t = epoch - origin;
  const double decayed = std::max(0.0, epoch - std::max(origin, decay_start_epoch));
  const double warm = warmup_epochs > 0 ? std::min(1.0, t / warmup_epochs) : 1.0;
  const double anneal =
      anneal_end_epoch > 0 ? std::clamp((anneal_end_epoch - t) / (anneal_end_epoch - anneal_start_epoch), 0.0, 1.0)
                           : 1.0;
  return (r ? r->learning_rate.value_or(learning_rate) : learning_rate) * warm * std::pow(decay, decayed) * anneal;
}

double Schedule::momentum_at(double epoch) const {
  const double t = epoch - origin_at(epoch);
  const double f = momentum_epochs > 0 ? std::min(1.0, t / momentum_epochs) : 1.0;
  return momentum_start + (momentum_end - momentum_start) * f;
}

double Schedule::lambda_scale_at(double epoch) const {
  if (lambda_stages.empty()) return 1.0;
  double start = 0;
  for (const LambdaStage& s : lambda_stages) {
    if (epoch < start + s.epochs) return s.scale;
    start += s.epochs;
  }
  return lambda_stages.back().scale;
}

OptimizerStep Schedule::at(int64_t step, double epoch) const {
  return {.step = step, .learning_rate = learning_rate_at(epoch), .momentum = momentum_at(epoch), .epoch = epoch};
}

std::vector<Restart> periodic_restarts(int64_t every, int64_t before, int64_t epochs) {
  std::vector<Restart> out;
  if (every <= 0) return out;
  for (int64_t e = every; e < epochs && (before == 0 || e < before); e += every) {
    out.push_back({.epoch = static_cast<double>(e), .learning_rate = {}});
  }
  return out;
}

PlannedStep planned_step(const Schedule& schedule, int64_t step, int64_t steps_per_epoch) {
  PlannedStep p;
  p.epoch = static_cast<double>(step) / static_cast<double>(steps_per_epoch);
  p.lambda_scale = schedule.lambda_scale_at(p.epoch);
  // The optimizer's period: from the run's start or its last restart, whose first step
  // resets the optimizer's state (also on a resume, which lands on it as any run does).
  const double origin = schedule.origin_at(p.epoch);
  const auto first_step = static_cast<int64_t>(std::ceil(origin * static_cast<double>(steps_per_epoch) - 1e-9));
  p.restart = origin > 0 && step == first_step;
  p.update = schedule.at(step - first_step, p.epoch);
  return p;
}

double penalty_weight(const PenaltyHandle& penalty, double scale) {
  return penalty.term.scheduled ? penalty.term.lambda * scale : penalty.term.lambda;
}

void set_penalty_weights(Tape<float>& tape, const std::vector<PenaltyHandle>& penalties, double scale) {
  for (const PenaltyHandle& p : penalties) tape.set_constant(p.lambda, static_cast<float>(penalty_weight(p, scale)));
}

void PenaltyWeights::set(Tape<float>& tape, double scale) {
  if (scale == scale_) return;
  set_penalty_weights(tape, penalties_, scale);
  scale_ = scale;
}

}  // namespace pens
