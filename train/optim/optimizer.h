// Optimizers: how a step's gradients change the parameters. An optimizer is an object
// with explicit state (buffers laid out like the parameter store, which checkpoints save
// by name) and a step; constraints such as max-norm are not part of it (they run after
// it, train/optim/constraints.h). Kinds are an open registry, like ops, noise kinds and penalty
// kinds: SGD with momentum, AdaGrad and Adam are built in (train/optim/sgd.cpp,
// train/optim/adagrad.cpp, train/optim/adam.cpp), and a program adds its own with
// OptimizerRegistry::register_global()
// (docs/adding-an-optimizer.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pens/autodiff/param_store.h"
#include "pens/ops/ir/attributes.h"
#include "pens/ops/ir/named_table.h"
#include "pens/serialization/checkpoint.h"

namespace pens {

// What changes from one update to the next, from the schedules (train/optim/schedule.h).
struct OptimizerStep {
  int64_t step = 0;            // updates made before this one (bias corrections count from it)
  double learning_rate = 0;
  double momentum = 0;         // for optimizers with momentum; others ignore it
  double epoch = 0;            // when the update falls: what gradient transforms go by
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // The registered kind, as configs and checkpoints name it.
  virtual std::string_view kind() const = 0;
  // One update of the store's values from its gradients (which it leaves as they are).
  virtual void step(const OptimizerStep& s) = 0;
  // Whether the update is elementwise with each element's result the same whichever
  // range it falls in: then step_range() runs it on any part of the store, and a
  // constraint may run it block by block to read each block again while it is still in
  // cache (Constraint::update_and_apply).
  virtual bool elementwise() const { return false; }
  // step(s) on elements begin .. begin + n - 1 of the store alone, on the calling thread.
  // Only where elementwise(); the default is an Error.
  virtual void step_range(const OptimizerStep& s, int64_t begin, int64_t n);
  // Every buffer of state, by name, laid out like the store's values: what a checkpoint
  // saves and restores. Empty for a stateless optimizer.
  virtual std::vector<StateBuffer> state() = 0;
  // Forgets every update so far, as a newly made optimizer with the same settings: a
  // schedule's restart (train/optim/schedule.h). By default every state buffer becomes 0.
  virtual void restart();

  OptimizerState checkpoint_state() { return {std::string(kind()), state()}; }
};

struct OptimizerKind {
  static constexpr const char* kWhat = "optimizer";
  std::string name;
  std::string summary;  // one line: the update rule
  // Settings of the kind, in a config's optimizer section beside the schedules (checked
  // and given their defaults before make() sees them).
  std::vector<AttrSpec> settings;
  std::function<std::unique_ptr<Optimizer>(ParamStore<float>& params, const Attributes& settings)> make;
};

// OptimizerRegistry::global().at("sgd"); OptimizerRegistry::register_global(kind) adds one.
using OptimizerRegistry = Registry<OptimizerKind>;
template <>
std::vector<OptimizerKind> builtin_kinds<OptimizerKind>();

// An optimizer of a registered kind over `params` (which must outlive it). Settings are
// checked against the kind's schema; an Error names what is wrong.
std::unique_ptr<Optimizer> make_optimizer(std::string_view kind, ParamStore<float>& params,
                                          Attributes settings = {});

}  // namespace pens
