// Training checkpoints: parameters, optimizer state, the step count, the noise seed and
// the training configuration in one file, written atomically (temporary file, fsync,
// rename), so a process killed at any moment leaves the previous checkpoint or the new
// one, never a torn one. Everything a step draws is a function of (seed, step), so a run
// resumed from a checkpoint continues exactly as if it had never stopped.
//
// Layout: one line of JSON (the header: step, seed, config, the tensors' names and
// shapes, the payload's size and SHA-256), a newline, then the payload: every tensor as
// little-endian float32, in the order the header lists them.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "autodiff/param_store.h"
#include "models/optimizer.h"

namespace pens {

struct TrainingState {
  int64_t step = 0;    // steps completed
  uint64_t seed = 0;   // the noise key of step n is {seed, n}
  nlohmann::json config = nlohmann::json::object();
  bool operator==(const TrainingState&) const = default;
};

// `before_rename` runs between the complete write and the rename (fault injection).
void save_checkpoint(const std::string& path, const TrainingState& state, const ParamStore<float>& params,
                     const Sgd& optimizer, const std::function<void()>& before_rename = {});

// Restores parameters and optimizer state (names and shapes must match the model's) and
// returns the rest. Throws an Error naming the file and what is wrong.
TrainingState load_checkpoint(const std::string& path, ParamStore<float>& params, Sgd& optimizer);

}  // namespace pens
