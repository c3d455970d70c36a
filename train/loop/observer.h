// What a training run reports while it goes (the CLI draws a progress line from it), and
// what it returns when it ends.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace pens {

struct TrainObserver {
  virtual ~TrainObserver() = default;
  // After every step (cheap: no evaluation), with the step's objective.
  virtual void on_step(int64_t /*step*/, int64_t /*total_steps*/, double /*epoch*/, double /*objective*/,
                       double /*elapsed_seconds*/) {}
  // After every evaluation, with the line written to metrics.jsonl.
  virtual void on_eval(const nlohmann::json& /*metrics*/) {}
  virtual void on_message(const std::string& /*text*/) {}
};

struct TrainSummary {
  nlohmann::json json;  // what summary.json holds
  bool diverged = false;
};

}  // namespace pens
