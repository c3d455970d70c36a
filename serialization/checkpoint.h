// Training checkpoints: parameters, the optimizer's state, the step count, the noise seed
// and the training configuration in one file, written atomically (temporary file, fsync,
// rename), so a process killed at any moment leaves the previous checkpoint or the new
// one, never a torn one. Everything a step draws is a function of (seed, step), so a run
// resumed from a checkpoint continues exactly as if it had never stopped.
//
// Layout: one line of JSON (the header: step, seed, config, the optimizer's kind, the
// tensors' names, parts and shapes, the payload's size and SHA-256), a newline, then the
// payload: every tensor as little-endian float32, in the order the header lists them.
// The parts are "value" (the parameters), then each buffer of the optimizer's state by
// its name ("velocity" for SGD), every one laid out like the parameters.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pens/autodiff/param_store.h"

namespace pens {

// The version this pens writes. Version 1 (before optimizers were named) is read as SGD
// state, its "momentum" part as SGD's "velocity".
inline constexpr int64_t kCheckpointVersion = 2;

struct TrainingState {
  int64_t step = 0;    // steps completed
  uint64_t seed = 0;   // the run's noise seed
  nlohmann::json config = nlohmann::json::object();
  // Wall-clock seconds the run had trained when the checkpoint was written, over all its
  // resumes: a resumed run's clock (its budget, its minutes) goes on from here. 0 in files
  // written before pens saved it.
  double elapsed_seconds = 0;
  int64_t version = kCheckpointVersion;  // of the file it was read from
  bool operator==(const TrainingState&) const = default;
};

// A buffer of optimizer state, one float per parameter element, laid out like the
// parameter store's values.
struct StateBuffer {
  std::string name;
  std::span<float> values;
};

// The optimizer's state as checkpoints see it: its kind and its buffers.
struct OptimizerState {
  std::string kind;
  std::vector<StateBuffer> buffers;
};

// `before_rename` runs between the complete write and the rename (fault injection).
void save_checkpoint(const std::string& path, const TrainingState& state, const ParamStore<float>& params,
                     const OptimizerState& optimizer, const std::function<void()>& before_rename = {});

// Restores parameters and optimizer state (the kind, and every tensor's name and shape,
// must match) and returns the rest. Throws an Error naming the file and what is wrong,
// before changing anything.
TrainingState load_checkpoint(const std::string& path, ParamStore<float>& params, const OptimizerState& optimizer);

}  // namespace pens
