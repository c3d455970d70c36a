#include <algorithm>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "pens/graph/noise.h"
#include "pens/graph/penalty.h"
#include "pens/models/data_source.h"
#include "pens/models/treebank_source.h"
#include "pens/models/family.h"
#include "pens/ops/registry.h"
#include "pens/serialization/json_text.h"
#include "pens/serialization/model_file.h"
#include "pens/train/loop/run_kind.h"
#include "pens/train/optim/optimizer.h"

namespace pens::cli {

namespace {
std::string differentiable_inputs(const OpDef& op) {
  std::string out;
  for (const InputSlot& s : op.inputs) {
    if (!s.differentiable) continue;
    if (!out.empty()) out += ",";
    out += s.name;
  }
  if (op.variadic && op.inputs.back().differentiable) out += "...";
  return out.empty() ? "-" : out;
}

nlohmann::json schema_json(const std::vector<AttrSpec>& schema) {
  nlohmann::json attrs = nlohmann::json::array();
  for (const AttrSpec& a : schema) {
    nlohmann::json spec = {{"name", a.name}, {"type", attr_type_name(a.type)}, {"required", a.required}, {"doc", a.doc}};
    if (auto* d = std::get_if<AttrValue>(&a.default_value)) {
      spec["default"] = attribute_json(*d);
    }
    if (a.range.bounded()) spec["range"] = a.range.str();
    attrs.push_back(spec);
  }
  return attrs;
}

// "p=0.5 (in [0, 1)), rescale=1 (in [0, 1]), group (required)"
std::string schema_text(const std::vector<AttrSpec>& schema) {
  std::string out;
  for (const AttrSpec& a : schema) {
    out += out.empty() ? "" : ", ";
    if (auto* d = std::get_if<AttrValue>(&a.default_value)) {
      out += a.name + "=" + attr_to_string(*d);
    } else {
      out += a.name + (a.required ? " (required)" : "");
    }
    if (a.range.bounded()) out += " (" + a.range.str() + ")";
  }
  return out;
}

void print_row(const std::string& name, const std::string& summary, const std::string& extra) {
  std::cout << "  " << std::left << std::setw(14) << name << summary << "\n";
  if (!extra.empty()) std::cout << "  " << std::setw(14) << "" << extra << "\n";
}
}  // namespace

int run_ops(const std::vector<std::string>& argv) {
  const Args args(argv, {"json"}, {});
  if (!args.positional().empty()) fail("unexpected argument '", args.positional()[0], "'");
  const auto ops = OpRegistry::global().all();
  if (args.flag("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const OpDef* op : ops) {
      nlohmann::json inputs = nlohmann::json::array();
      for (const InputSlot& s : op->inputs) {
        inputs.push_back({{"name", s.name},
                          {"dtype", dtype_name(s.dtype)},
                          {"differentiable", s.differentiable}});
      }
      out.push_back({{"name", op->name},
                     {"summary", op->summary},
                     {"arity", op->inputs.size()},
                     {"variadic", op->variadic},
                     {"inputs", inputs},
                     {"differentiable", differentiable_inputs(*op) != "-"},
                     {"stochastic", op->stochastic},
                     {"leaf", op->leaf},
                     {"attributes", schema_json(op->attrs)}});
    }
    std::cout << format_json(out) << "\n";
    return 0;
  }
  // Columns as wide as their longest entry, and two spaces between them.
  size_t name_width = std::string("op").size(), inputs_width = std::string("differentiable").size();
  for (const OpDef* op : ops) {
    name_width = std::max(name_width, op->name.size());
    inputs_width = std::max(inputs_width, differentiable_inputs(*op).size());
  }
  const int name_column = static_cast<int>(name_width + 2), inputs_column = static_cast<int>(inputs_width + 2);
  std::cout << std::left << std::setw(name_column) << "op" << std::setw(7) << "arity" << std::setw(inputs_column)
            << "differentiable" << std::setw(12) << "stochastic"
            << "summary\n";
  for (const OpDef* op : ops) {
    std::cout << std::setw(name_column) << op->name << std::setw(7) << op->arity_str() << std::setw(inputs_column)
              << differentiable_inputs(*op) << std::setw(12) << (op->stochastic ? "yes" : "no") << op->summary << "\n";
  }
  std::cout << ops.size() << " ops\n";
  return 0;
}

int run_kinds(const std::vector<std::string>& argv) {
  const Args args(argv, {"json"}, {});
  if (!args.positional().empty()) fail("unexpected argument '", args.positional()[0], "'");
  const auto noise = NoiseRegistry::global().all();
  const auto penalties = PenaltyRegistry::global().all();
  const auto optimizers = OptimizerRegistry::global().all();
  const auto sources = DataSourceRegistry::global().all();
  const auto treebanks = TreebankSourceRegistry::global().all();
  const auto runs = RunKindRegistry::global().all();
  const auto families = ModelFamilyRegistry::global().all();
  if (args.flag("json")) {
    nlohmann::json out = {{"noise", nlohmann::json::array()},
                          {"penalty", nlohmann::json::array()},
                          {"optimizer", nlohmann::json::array()},
                          {"data_source", nlohmann::json::array()},
                          {"treebank_source", nlohmann::json::array()},
                          {"run", nlohmann::json::array()},
                          {"model_family", nlohmann::json::array()}};
    for (const NoiseKind* k : noise) {
      out["noise"].push_back({{"name", k->name}, {"summary", k->summary}, {"parameters_only", k->parameters_only},
                              {"params", schema_json(k->params)}});
    }
    for (const PenaltyKind* k : penalties) {
      out["penalty"].push_back(
          {{"name", k->name}, {"summary", k->summary}, {"symmetrised", k->symmetrised}, {"params", k->params}});
    }
    for (const OptimizerKind* k : optimizers) {
      out["optimizer"].push_back({{"name", k->name}, {"summary", k->summary}, {"settings", schema_json(k->settings)}});
    }
    for (const DataSourceKind* k : sources) {
      out["data_source"].push_back({{"name", k->name}, {"summary", k->summary}, {"settings", schema_json(k->settings)}});
    }
    for (const TreebankSourceKind* k : treebanks) {
      out["treebank_source"].push_back({{"name", k->name}, {"summary", k->summary}, {"settings", schema_json(k->settings)}});
    }
    for (const RunKind* k : runs) out["run"].push_back({{"name", k->name}, {"summary", k->summary}});
    for (const ModelFamily* k : families) {
      out["model_family"].push_back({{"name", k->name}, {"summary", k->summary}, {"settings", schema_json(k->settings)}});
    }
    std::cout << format_json(out) << "\n";
    return 0;
  }
  std::cout << "noise kinds (a node's \"noise\" annotations):\n";
  for (const NoiseKind* k : noise) {
    print_row(k->name, k->summary, cat(k->parameters_only ? "parameters only; " : "", schema_text(k->params)));
  }
  std::cout << "penalty kinds (pseudo_ensemble.penalties[].kind):\n";
  for (const PenaltyKind* k : penalties) {
    std::string notes = k->symmetrised ? "symmetrised between two children" : "";
    for (const auto& [name, value] : k->params) notes += cat(notes.empty() ? "" : "; ", name, "=", value);
    print_row(k->name, k->summary, notes);
  }
  std::cout << "optimizers (a training config's optimizer.kind):\n";
  for (const OptimizerKind* k : optimizers) print_row(k->name, k->summary, schema_text(k->settings));
  std::cout << "data sources (a dense config's data.source):\n";
  for (const DataSourceKind* k : sources) print_row(k->name, k->summary, schema_text(k->settings));
  std::cout << "treebank sources (a tree or skip-gram config's data.source):\n";
  for (const TreebankSourceKind* k : treebanks) print_row(k->name, k->summary, schema_text(k->settings));
  std::cout << "kinds of run (a config's kind):\n";
  for (const RunKind* k : runs) print_row(k->name, k->summary, "");
  std::cout << "model families (pens new; a program's own: docs/adding-a-model.md):\n";
  for (const ModelFamily* k : families) print_row(k->name, k->summary, schema_text(k->settings));
  return 0;
}

}  // namespace pens::cli
