#include "pens/train/loop/run_kind.h"

namespace pens {

const std::vector<RunOptionSpec>& run_option_specs() {
  // Seeds and counts in the ranges configs allow them.
  constexpr double kSeeds = 1e15, kCounts = 1e9;
  static const std::vector<RunOptionSpec> specs = {
      {"out", &RunOptions::out, "DIR", "output folder (default runs/<config name>)"},
      {"labels", &RunOptions::labels, "N", "labeled examples (N/10 per class; 0: all; dense runs)", 0, kCounts},
      {"split_seed", &RunOptions::split_seed, "S", "seed of the labeled/validation split (dense runs)", 0, kSeeds},
      {"shards", &RunOptions::shards, "K",
       "compute each batch as K shards (a power of two) whose gradients add in a fixed order: the same run, bit for "
       "bit, on any number of processes dividing K (dense runs)",
       1, 1024},
      {"precision", &RunOptions::precision, "P",
       "float32, float32-onednn or bfloat16: the precision of the matrix products and their kernel (the last two "
       "on oneDNN; dense runs)"},
      {"seed", &RunOptions::seed, "S", "seed of batch order and noise", 0, kSeeds},
      {"epochs", &RunOptions::epochs, "E", "epochs", 1, kCounts},
      {"budget_minutes", &RunOptions::budget_minutes, "M", "stop after M minutes of wall-clock time", 0, 1e9},
      {"data_dir", &RunOptions::data_dir, "DIR", "folder of the data (MNIST's IDX files by default: data/mnist)"},
      {"threads", &RunOptions::threads, "T", "threads per process (0: the CPUs this process may use)", 0, 1024},
      {"init", &RunOptions::init, "MODEL", "start from the parameter values of MODEL (pens pretrain's)"},
      {"resume", &RunOptions::resume, "", "continue from the output folder's checkpoint.pens"},
      {"resume_from", &RunOptions::resume_from, "FILE",
       "continue from FILE instead (checkpoint-STEP.pens, one of the checkpoints the folder keeps): after a "
       "divergence, roll back to an earlier step, with a lower learning rate in the config"},
  };
  return specs;
}

std::string run_kind_of(const nlohmann::json& config) {
  if (!config.is_object()) return "classifier";  // its parser says what is wrong
  if (const auto kind = config.find("kind"); kind != config.end() && kind->is_string()) return kind->get<std::string>();
  if (const auto task = config.find("task"); task != config.end()) {
    return task->is_string() && task->get<std::string>() == "skipgram" ? "skipgram" : "trees";
  }
  return "classifier";
}

}  // namespace pens
