#include "pens/models/skipgram.h"

#include "pens/ops/ir/error.h"

namespace pens {

Graph build_skipgram(const SkipgramSpec& spec) {
  if (spec.vocabulary < 1 || spec.dim < 1) fail("skipgram: vocabulary and dim must be >= 1");
  if (!(spec.dropout >= 0 && spec.dropout < 1)) fail("skipgram: dropout must be in [0, 1), got ", spec.dropout);
  Graph g;
  const NodeId E = g.param("E", Shape{spec.vocabulary, spec.dim}, {{"init", "normal"}, {"std", 0.1}});
  const NodeId O = g.param("O", Shape{spec.vocabulary, spec.dim}, {{"init", "zeros"}});
  const NodeId centre = g.input("centre", Shape{kBatch}, DType::Index);
  const NodeId candidate = g.input("candidate", Shape{kBatch}, DType::Index);
  const NodeId sign = g.input("sign", Shape{kBatch});
  NodeId h = g.add("tanh", {g.add("embedding", {E, centre}, {}, "centre_vector")}, {}, "centre_tanh");
  if (spec.dropout > 0) h = g.add("dropout", {h}, {{"p", spec.dropout}}, "centre_dropout");
  const NodeId o = g.add("embedding", {O, candidate}, {}, "candidate_vector");
  const NodeId dot = g.add("sum", {g.add("mul", {h, o}, {}, "products")}, {{"axes", std::vector<int64_t>{1}}}, "scores");
  const NodeId agree = g.add("sigmoid", {g.add("mul", {dot, sign}, {}, "signed_scores")}, {}, "agreement");
  const NodeId nll = g.add("log", {agree}, {}, "log_agreement");
  const NodeId loss = g.add("scale", {g.add("mean", {nll}, {}, "mean_log_agreement")}, {{"factor", -1.0}}, "loss");
  g.set_flag(loss, kLoss);
  g.set_flag(dot, kOutput);
  return g;
}

}  // namespace pens
