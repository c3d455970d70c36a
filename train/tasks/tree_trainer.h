// Training a tree model on a treebank (the Stanford Sentiment Treebank's by default): minibatches of trees, run in
// groups on the threads (TreeStepGraphs; each tree's noise keyed by its index), ℓ2 per parameter, word vectors
// optionally frozen for the first epochs, root accuracy on dev after every epoch and the
// test figure at the best dev epoch. The same run folder as pens train on MNIST
// (train/loop/run_folder.h): config.json, metrics.jsonl, checkpoint.pens, summary.json,
// model.json, best.model.json, learning-curve.png.
#pragma once

#include <map>
#include <string>

#include "pens/autodiff/param_store.h"
#include "pens/models/sst.h"
#include "pens/train/config/tree_config.h"
#include "pens/train/dist/communicator.h"
#include "pens/train/loop/observer.h"
#include "pens/train/loop/run_folder.h"
#include "pens/train/loop/run_kind.h"

namespace pens {

// The treebank of a config: read by its source (models/treebank_source.h), vocabulary
// built from its training trees, ids assigned.
struct TreeData {
  SentimentTreebank bank;
  Vocabulary vocabulary;
};
TreeData load_tree_data(const std::string& source, const std::string& dir, const Attributes& settings,
                        const VocabularyPolicy& vocabulary);


// Trains into out_dir; with `resume`, continues from its checkpoint (or the one it names)
// exactly as an unbroken run would (tree order and noise are functions of seed and step).
// With a communicator of P > 1 processes the run is data-parallel: each process computes
// 1/P of every step's trees and of every evaluation set, their gradients and counts are
// summed, and process 0 writes out_dir (the figures then match one process's up to the
// order of the sums).
TrainSummary train_trees(const TreeConfig& config, const TreeData& data, const std::string& out_dir,
                         TrainObserver& observer, const Resume& resume = {}, Communicator* communicator = nullptr);

// A tree run as pens train prepares it (the "trees" kind of run, train/loop/run_kind.h): its
// config with the options applied, and its treebank.
struct PreparedTrees : PreparedTask {
  TreeConfig config;
  TreeData data;

  double budget_minutes() const override { return config.budget_minutes; }
  std::string description() const override;
  TrainSummary train(const std::string& out_dir, TrainObserver& observer, const Resume& resume,
                     Communicator* communicator) const override;
  // The task reports each epoch's evaluation as a message.
  std::string evaluation_line(const nlohmann::json& /*metrics*/) const override { return ""; }
  std::vector<std::string> results(const nlohmann::json& summary) const override;
};

}  // namespace pens
