// A model as it lives in a file: the parent graph, its pseudo-ensemble spec, free-form
// metadata, and parameter values once trained.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "pens/autodiff/param_store.h"
#include "pens/graph/graph.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/graph/tree.h"

namespace pens {

struct Model {
  Graph graph;
  std::optional<PseudoEnsembleSpec> ensemble;
  // A recursive network over trees: the graph is its cell, these its ports (graph/tree.h).
  std::optional<TreePorts> tree;
  nlohmann::json metadata = nlohmann::json::object();
  // Parameter values; null for a model that was never trained (its parameters come from
  // their init attributes).
  std::shared_ptr<ParamStore<float>> values;
  // The sidecar file the values were read from ("" when inline or absent), so that a
  // model read and written again refers to the same file.
  std::string weights_file;
};

}  // namespace pens
