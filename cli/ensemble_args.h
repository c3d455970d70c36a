// What inspect and gradcheck share: the options --children --seed --labeled --batch
// --parent --pairing --kind --tree, read into the library's BuildOptions.
#pragma once
#include "cli/args.h"
#include "pens/serialization/model.h"
#include "pens/train/tasks/inspect.h"

namespace pens::cli {

inline const std::vector<std::string> kEnsembleOptions = {"children", "labeled", "batch", "pairing", "kind", "tree"};
inline constexpr const char* kEnsembleHelp =
    "  --children K   children in the pseudo-ensemble (default: the model's spec)\n"
    "  --batch B      rows of the batch the graph is built for: the shapes inspect\n"
    "                 shows, the rows gradcheck checks (default 8)\n"
    "  --labeled L    rows 0..L-1 of a batch carry labels (default: half the batch\n"
    "                 when a penalty asks for labeled or unlabeled rows, else all)\n"
    "  --pairing P    override the spec's pairing (child-child or parent-child)\n"
    "  --kind K       override the kind of every penalty (a registered penalty kind:\n"
    "                 `pens kinds` lists them)\n"
    "  --parent       the parent graph as written, without the pseudo-ensemble\n"
    "  --tree TREE    tree models: the graph of this tree, '(label child child)' or\n"
    "                 '(label word)' (labels 0..4; a 2-class model maps them as the\n"
    "                 binary task does); without it, the cell\n";

BuiltGraph build_for_cli(const Model& model, const Args& args);

}  // namespace pens::cli
