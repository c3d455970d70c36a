#include "pens/train/evaluation.h"

#include <Eigen/Core>
#include <cmath>

#include "pens/graph/infer.h"
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

}  // namespace pens
