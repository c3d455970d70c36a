// Training a tree model on the Stanford Sentiment Treebank: minibatches of trees, one
// graph per tree in each step (keyed by the tree's index), ℓ2 per parameter, word vectors
// optionally frozen for the first epochs, root accuracy on dev after every epoch and the
// test figure at the best dev epoch. The same run folder as pens train on MNIST
// (train/run_folder.h): config.json, metrics.jsonl, checkpoint.pens, summary.json,
// model.json, best.model.json, learning-curve.png.
#pragma once

#include <string>

#include "pens/models/sst.h"
#include "pens/train/observer.h"
#include "pens/train/run_folder.h"
#include "pens/train/tree_config.h"

namespace pens {

// The treebank of a config: read, vocabulary built from its training trees, ids assigned.
struct TreeData {
  SentimentTreebank bank;
  Vocabulary vocabulary;
};
TreeData load_tree_data(const std::string& dir, const VocabularyPolicy& vocabulary);

// Trains into out_dir; with `resume`, continues from its checkpoint (or the one it names)
// exactly as an unbroken run would (tree order and noise are functions of seed and step).
TrainSummary train_trees(const TreeConfig& config, const TreeData& data, const std::string& out_dir,
                         TrainObserver& observer, const Resume& resume = {});

}  // namespace pens
