#include "cli/ensemble_args.h"

namespace pens::cli {

BuiltGraph build_for_cli(const Model& model, const Args& args) {
  BuildOptions options;
  options.batch = args.option_int("batch", 8, 1, kMaxBatch);
  options.tree = args.option("tree");
  options.tree_source = "--tree";
  options.parent = args.flag("parent");
  options.children = args.given_int("children", 1, kMaxChildren);
  options.pairing = args.option("pairing");
  options.penalty_kind = args.option("kind");
  // At least one row of a batch stays unlabeled.
  options.labeled_rows = args.given_int("labeled", -1, options.batch - 1);
  return build_graph(model, options);
}

}  // namespace pens::cli
