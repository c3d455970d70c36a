// Parameter groups: some parameters updated by an optimizer of their own, as a config's
// `optimizer.groups` declares them (docs/training.md). Tai, Socher and Manning's Tree-LSTM
// is trained so: AdaGrad for the network, plain SGD at a rate of its own for the word
// vectors. Each group is an elementwise optimizer (Optimizer::elementwise) run on the
// store's ranges of its parameters; the rest of the store is the run's own optimizer's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pens/train/optim/optimizer.h"

namespace pens {

struct OptimizerGroup {
  std::vector<std::string> params;  // parameter names, each in one group at most
  std::string kind = "sgd";         // a registered optimizer kind (elementwise)
  // The group's rate where the run's schedule is at its own base rate: the schedule's
  // warm-up, decay and annealing scale both alike.
  double learning_rate = 0.1;
  double momentum = 0;              // constant; the run's momentum ramp is not the group's
  Attributes settings = {};         // the kind's own settings
  bool operator==(const OptimizerGroup&) const = default;
};

// The run's optimizer (`kind` with `settings`, its schedule's base rate `base_rate`) with
// `groups` beside it; without groups, make_optimizer(kind, params, settings) itself. An
// Error names an unknown parameter, one named twice, or a kind that does not update
// ranges. Checkpoints save the groups' state under "group<i>/<buffer>" beside the run
// optimizer's, and name the kind "<kind>+groups".
std::unique_ptr<Optimizer> make_optimizer_with_groups(const std::string& kind, const Attributes& settings,
                                                      double base_rate, const std::vector<OptimizerGroup>& groups,
                                                      ParamStore<float>& params);

// For a run's first lines: "" without groups, else " (E, F on sgd at 0.1; ...)".
std::string describe_groups(const std::vector<OptimizerGroup>& groups);

}  // namespace pens
