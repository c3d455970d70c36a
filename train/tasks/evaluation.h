// Evaluating a classifier: which inputs and output of a model a trainer feeds and reads,
// and the confusion matrix and error of its output over a data set.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/graph/graph.h"
#include "pens/models/dataset.h"

namespace pens {

// The one real input (the examples), the one index input (their labels, "" when the
// graph has none: an inference graph) and the one output node of a classifier.
struct ClassifierIo {
  std::string x, y, output;
};
// Errors name `source` (the model file) and what is missing or ambiguous.
ClassifierIo classifier_io(const Graph& g, const std::string& source, bool needs_labels = true);

// Refuses, before anything runs, a data set whose examples are not as wide as the
// model's input `x` or that has more classes than the model's output has columns;
// `source` names the model file, `data` the data ("data/mnist, test images").
void check_data_fits(const Graph& g, const ClassifierIo& io, const Dataset& d, const std::string& source,
                     const std::string& data);

// Counts [true class][predicted class] of the tape's output over a data set, a
// tape-batch at a time (the last batch padded with repeated rows, their predictions
// dropped). `x` is the tape's input for the examples.
std::vector<std::vector<int64_t>> confusion_matrix(Tape<float>& tape, const std::string& x, const std::string& output,
                                                   const Dataset& d);

// The fraction of a data set the tape's output gets wrong; NaN for an empty set.
double classification_error(Tape<float>& tape, const ClassifierIo& io, const Dataset& d);

// Population statistics for batch normalisation: replaces the running statistics a
// model's inference reads (the params of its at_inference moving averages of batch
// statistics) with their mean over batches of training data, each batch normalised by
// its own statistics under the weights inference reads (build_statistics,
// graph/pseudo_ensemble.h). Running statistics are an average over the last few
// hundred steps' weights; a mean teacher's averaged weights met other statistics while
// they were kept. The VAT authors' code recomputes them so after training, and so does
// stochastic weight averaging.
class StatisticsRecalibration {
 public:
  // Compiles the statistics graph for batches of `batch` rows (the training batch's size
  // gives statistics like training's); `values` is the store inference reads.
  StatisticsRecalibration(const Graph& model, ParamStore<float>& values, int64_t batch);
  // Sets each running statistic to its mean over the full batches of `rows` of `d`, in
  // order (a ragged rest is not used: a smaller batch has other statistics); returns the
  // number of batches. Fewer rows than one batch is an Error.
  int64_t run(const Dataset& d, std::span<const int64_t> rows);
  int64_t batch() const { return tape_.batch(); }

 private:
  ParamStore<float>& values_;
  Graph graph_;  // build_statistics(model)
  Tape<float> tape_;
  std::string x_;                                              // the examples' input
  std::vector<std::pair<std::string, std::string>> targets_;  // statistic node -> its running param
  std::vector<double> sums_;
};

}  // namespace pens
