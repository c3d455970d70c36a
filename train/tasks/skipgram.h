// Skip-gram pre-training of the word vectors of a tree network (pens pretrain on a config
// whose "task" is "skipgram"; docs/trees.md): the graph of models/skipgram.h trained on
// the words of the treebank's training and dev sentences, each word predicting the words
// within `window` of it against `negatives` words drawn from the unigram distribution to
// the power 0.75, with AdaGrad. The vectors are then scaled to a standard deviation of `word_std` and
// saved as parameter E of out_dir/model.json, which a tree config's init_from reads.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "pens/train/loop/observer.h"
#include "pens/train/loop/run_folder.h"
#include "pens/train/tasks/tree_trainer.h"

namespace pens {

struct SkipgramConfig {
  std::string description;
  std::string data_source = "sst";  // the data section as the tree config's, so that E has the same rows
  std::string data_dir = "../shared/data/sst";
  Attributes data_settings;
  VocabularyPolicy vocabulary;
  int64_t dim = 70;
  int64_t window = 5;
  int64_t negatives = 5;
  double dropout = 0.2;
  int64_t batch = 512;  // (centre, context) pairs per step
  double learning_rate = 0.05;  // AdaGrad's
  int64_t epochs = 5;
  double word_std = 0.5;
  uint64_t seed = 1;
  int threads = 0;  // 0: every CPU this process may use (its bits do not depend on the count)
  double budget_minutes = 0;  // > 0: the run stops at the first step past it
  double checkpoint_every_epochs = 1;
  int64_t checkpoint_keep = 1;  // checkpoints kept on disk, the latest included
};

SkipgramConfig parse_skipgram_config(const nlohmann::json& j, const std::string& source);
nlohmann::json to_json(const SkipgramConfig& c);

// Trains through the run loop (train/loop/run_loop.h) into out_dir: config.json,
// metrics.jsonl (the mean loss of each epoch), checkpoint.pens after every epoch (with the
// vectors unscaled: `resume` continues exactly as an unbroken run would), model.json (the
// vectors scaled) and summary.json.
TrainSummary pretrain_word_vectors(const SkipgramConfig& config, const TreeData& data, const std::string& out_dir,
                                   TrainObserver& observer, const Resume& resume = {});

}  // namespace pens
