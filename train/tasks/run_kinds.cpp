// The built-in kinds of run (train/loop/run_kind.h): one registration line each.
#include "pens/train/tasks/trainer.h"
#include "pens/train/tasks/tree_trainer.h"

namespace pens {

template <>
std::vector<RunKind> builtin_kinds<RunKind>() {
  return {classifier_run_kind(), tree_run_kind()};
}

}  // namespace pens
