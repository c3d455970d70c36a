#include "cli/ensemble_args.h"

#include "models/sst.h"
#include "ops/ir/error.h"
#include "train/tree_model.h"

namespace pens::cli {

BuiltGraph build_for_cli(const Model& model, const Args& args) {
  BuiltGraph out;
  out.batch = args.option_int("batch", 8, 1, kMaxBatch);
  if (auto text = args.option("tree")) {
    if (!model.tree) fail("--tree: the model is not a network over trees (it has no tree section)");
    std::vector<SentimentTree> trees = parse_trees(*text, "--tree");
    if (trees.size() != 1) fail("--tree: give one tree, got ", trees.size());
    const TreeModel tm(model, task_of(model));
    const UnrolledTree unrolled = tm.unroll(trees[0]);
    out.graph = args.flag("parent") ? unrolled.graph : tm.training_graph(unrolled);
    return out;
  }
  if (args.flag("parent") || !model.ensemble) {
    out.graph = model.graph;
    return out;
  }
  PseudoEnsembleSpec spec = *model.ensemble;
  spec.children = args.option_int("children", spec.children, 1, kMaxChildren);
  spec.pairing = args.option("pairing").value_or(spec.pairing);
  if (auto kind = args.option("kind")) {
    for (PenaltyTerm& t : spec.penalties) t.kind = *kind;
  }
  EnsembleOptions options;
  options.labeled_rows = args.option_int("labeled", spec.splits_rows() ? out.batch / 2 : -1, -1, out.batch);
  if (options.labeled_rows >= out.batch) {
    fail("--labeled ", options.labeled_rows, " leaves no unlabeled rows in a batch of ", out.batch);
  }
  out.ensemble = build_pseudo_ensemble(model.graph, spec, options);
  out.graph = out.ensemble->graph;
  return out;
}

}  // namespace pens::cli
