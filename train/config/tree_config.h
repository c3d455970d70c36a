// The config of a training run on sentiment trees (pens train CONFIG.json with a "task";
// docs/trees.md): the tree model, the treebank and task, minibatches of trees, the
// optimizer, ℓ2 per parameter, the length, evaluation and checkpoint cadence.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/sst.h"
#include "pens/ops/ir/attributes.h"
#include "pens/train/optim/groups.h"
#include "pens/train/optim/schedule.h"
#include "pens/train/optim/transform.h"

namespace pens {

struct TreeConfig {
  std::string source;  // the config file it was read from, which errors name (not written by to_json)
  std::string description;
  std::string model;  // a model file with a "tree" section (pens new ctn writes one)
  std::string model_patch;  // operations on the model file's JSON, as TrainConfig::model_patch
  std::string init_from;
  // A text file of pre-trained word vectors in GloVe's format (models/word_vectors.h) whose
  // rows start the word tables, after init_from; "" for none.
  std::string word_vectors;
  std::string task = "fine";  // fine | binary (models/sst.h)
  std::string data_source = "sst";  // a treebank source (models/treebank_source.h)
  std::string data_dir = "../shared/data/sst";
  Attributes data_settings;     // the source's own settings
  VocabularyPolicy vocabulary;  // data.min_count and data.lowercase
  int64_t batch_trees = 27;
  // A step's trees are computed in this many groups side by side, a thread each
  // (TreeStepGraphs); the update's bits depend on it, never on `threads`, which it caps.
  int64_t batch_groups = 4;
  std::string optimizer = "adagrad";
  Attributes optimizer_settings;
  // Parameters updated by optimizers of their own (optimizer.groups, train/optim/groups.h).
  std::vector<OptimizerGroup> optimizer_groups;
  // Gradient transforms after the l2 and word freezing below (optimizer.transforms).
  std::vector<TransformSpec> transforms;
  // The learning rate (0.01), its warm-up, decay and annealing, and the momentum, as a
  // classifier's config spells them (train/optim/schedule.h); the restarts below and the
  // λ stages join it in TreeTask.
  Schedule schedule{.learning_rate = 0.01};
  std::string max_norm_rule = "unit-incoming";  // for parameters with a max_norm (train/optim/constraints.h)
  // The optimizer restarts (AdaGrad: its sums of squares back to their initial value) at
  // the start of every epoch that is a multiple of restart_every_epochs (0: never), while
  // the epoch is below restart_before_epoch (0: no limit): periodic_restarts, the
  // schedule's restarts. The authors' code: every 9 epochs before epoch 250.
  int64_t restart_every_epochs = 0;
  int64_t restart_before_epoch = 0;
  // ℓ2 per parameter name: the objective gains Σ_p (λ_p / 2) ||θ_p||², the gradient λ_p θ_p.
  std::map<std::string, double> l2;
  // The word tables (the parameters the cell looks up by its words port: E in a CTN)
  // receive no update before this epoch.
  double freeze_words_epochs = 0;
  // The stages that scale the pseudo-ensemble penalties' λ (as in MNIST configs, without
  // restarts); replaces the model's pseudo_ensemble.lambda_schedule when given.
  std::optional<std::vector<LambdaStage>> lambda_schedule;
  int64_t epochs = 400;
  double budget_minutes = 0;
  double patience_epochs = 0;  // > 0: the run ends once its best dev epoch is this many epochs old
  uint64_t seed = 1;
  uint64_t init_seed = 1;
  int threads = 0;  // 0: every CPU this process may use
  int64_t eval_samples = 50;      // subspace models: class probabilities averaged over this many draws
  // Subspace models: when the run ends, the best-dev model is evaluated on dev and test
  // again with this many draws (the paper's test protocol: 50), so that every epoch's
  // evaluation may use fewer (eval.samples) to stay cheap. 0, or eval_samples: not again.
  int64_t final_samples = 50;
  int64_t train_eval_trees = 1000;  // training trees whose root accuracy is reported
  double checkpoint_every_epochs = 1;
  int64_t checkpoint_keep = 3;  // checkpoints kept on disk, the latest included
};

TreeConfig parse_tree_config(const nlohmann::json& j, const std::string& source);
nlohmann::json to_json(const TreeConfig& c);

// The "data" section tree and skip-gram configs share: the treebank source, its folder and
// settings, and the vocabulary policy (one reader, so that pre-trained word vectors and a
// tree model's E are built from the same words). `section` is the section's JSON (null:
// none, the defaults), `config` the config's name.
void read_data_section(const nlohmann::json* section, const std::string& config, std::string& source,
                       std::string& dir, Attributes& settings, VocabularyPolicy& vocabulary);
nlohmann::json data_section_json(const std::string& source, const std::string& dir, const Attributes& settings,
                                 const VocabularyPolicy& vocabulary);

}  // namespace pens
