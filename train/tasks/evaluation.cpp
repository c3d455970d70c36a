#include "pens/train/tasks/evaluation.h"

#include <Eigen/Core>
#include <cmath>

#include "pens/graph/infer.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/ops/ir/error.h"

namespace pens {

ClassifierIo classifier_io(const Graph& g, const std::string& source, bool needs_labels) {
  ClassifierIo io;
  for (NodeId v : g.nodes()) {
    const Node& n = g[v];
    if (n.op->name == "input") {
      std::string& slot = n.attrs.get_string("dtype") == "index" ? io.y : io.x;
      if (!slot.empty()) {
        fail(source, ": a classifier has one real input (examples) and one index input (labels); found two of a kind: '",
             slot, "' and '", n.name, "'");
      }
      slot = n.name;
    }
    if (n.has(kOutput)) {
      if (!io.output.empty()) fail(source, ": a classifier has one output node; found '", io.output, "' and '", n.name, "'");
      io.output = n.name;
    }
  }
  if (io.x.empty()) fail(source, ": no real input to feed the examples to");
  if (needs_labels && io.y.empty()) fail(source, ": no index input for the labels");
  if (io.output.empty()) fail(source, ": no node is flagged as the output");
  return io;
}

void check_data_fits(const Graph& g, const ClassifierIo& io, const Dataset& d, const std::string& source,
                     const std::string& data) {
  const std::vector<ValueInfo> values = infer_values(g, 1);
  const Shape& x = values[g.at(io.x)].shape;
  if (x.cols() != d.dim) {
    fail(source, ": the input '", io.x, "' takes ", x.cols(), " values per example, but ", data, " has ", d.dim);
  }
  const Shape& out = values[g.at(io.output)].shape;
  if (d.classes > out.cols()) {
    fail(source, ": the output '", io.output, "' scores ", out.cols(), " classes, but ", data, " has ", d.classes);
  }
}

std::vector<std::vector<int64_t>> confusion_matrix(Tape<float>& tape, const std::string& x, const std::string& output,
                                                   const Dataset& d) {
  std::vector<std::vector<int64_t>> counts(static_cast<size_t>(d.classes), std::vector<int64_t>(static_cast<size_t>(d.classes), 0));
  for_each_batch(d, tape.batch(), [&](std::span<const int64_t> rows, int64_t first, int64_t n) {
    gather_rows(d, rows, 0, tape.input(x), {});
    tape.forward();
    auto scores = tape.value(output).mat();
    if (scores.cols() != d.classes) fail("the model's output '", output, "' has ", scores.cols(), " columns for ", d.classes, " classes");
    for (int64_t r = 0; r < n; ++r) {
      Eigen::Index best;
      scores.row(r).maxCoeff(&best);
      ++counts[static_cast<size_t>(d.y[static_cast<size_t>(first + r)])][static_cast<size_t>(best)];
    }
  });
  return counts;
}

double classification_error(Tape<float>& tape, const ClassifierIo& io, const Dataset& d) {
  if (d.size == 0) return std::nan("");
  const auto c = confusion_matrix(tape, io.x, io.output, d);
  int64_t right = 0;
  for (size_t i = 0; i < c.size(); ++i) right += c[i][i];
  return 1.0 - static_cast<double>(right) / static_cast<double>(d.size);
}

StatisticsRecalibration::StatisticsRecalibration(const Graph& model, ParamStore<float>& values, int64_t batch)
    : values_(values), graph_(build_statistics(model)), tape_(graph_, values, {.batch = batch}) {
  // Each running statistic has its source's shape (verify, graph/infer.h, checks it).
  size_t total = 0;
  for (const MovingAverage& a : model.averages()) {
    if (!a.at_inference || !of_batch_statistic(model, a)) continue;
    targets_.emplace_back(a.source, a.param);
    total += static_cast<size_t>(values_.value(a.param).size());
  }
  sums_.resize(total);
  // The examples are the one input the statistics read (no statistic reads labels).
  for (NodeId v : graph_.nodes()) {
    if (!is_input(graph_[v])) continue;
    if (!x_.empty()) {
      fail("the model's batch statistics read two inputs, '", x_, "' and '", graph_[v].name, "': expected one, the examples");
    }
    x_ = graph_[v].name;
  }
  if (x_.empty()) fail("the model's batch statistics read no input");
}

int64_t StatisticsRecalibration::run(const Dataset& d, std::span<const int64_t> rows) {
  const int64_t b = tape_.batch();
  const auto batches = static_cast<int64_t>(rows.size()) / b;
  if (batches == 0) fail("recalibrating running statistics needs at least one batch of ", b, " examples, got ", rows.size());
  std::fill(sums_.begin(), sums_.end(), 0.0);
  for (int64_t i = 0; i < batches; ++i) {
    gather_rows(d, rows.subspan(static_cast<size_t>(i * b), static_cast<size_t>(b)), 0, tape_.input(x_), {});
    tape_.forward();
    double* sum = sums_.data();
    for (const auto& [statistic, param] : targets_) {
      const TensorView<const float> v = tape_.value(statistic);
      for (int64_t j = 0; j < v.size(); ++j) *sum++ += v[j];
    }
  }
  const double* sum = sums_.data();
  for (const auto& [statistic, param] : targets_) {
    const TensorView<float> p = values_.value(param);
    for (int64_t j = 0; j < p.size(); ++j) p[j] = static_cast<float>(*sum++ / static_cast<double>(batches));
  }
  return batches;
}

}  // namespace pens
