// Model families: builders of model files from a few settings (`pens new mlp`, `pens new
// ctn`, `pens new ladder` are the built-in families' front ends). A family is a name, a
// one-line summary, the schema of its settings and a build function; the families are an
// open registry, like ops and data sources: a program adds its own with
// ModelFamilyRegistry::register_global() (docs/adding-a-model.md), then builds models of it
// with build_model() and trains them with any config of the kind they fit (a tree model
// with a tree config).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "pens/ops/ir/attributes.h"
#include "pens/ops/ir/named_table.h"
#include "pens/serialization/model.h"

namespace pens {

struct ModelFamily {
  static constexpr const char* kWhat = "model family";
  std::string name;
  std::string summary;
  std::vector<AttrSpec> settings;
  // The model of checked settings (defaults filled in); an Error names a setting that does
  // not fit.
  std::function<Model(const Attributes& settings)> build;
};

// ModelFamilyRegistry::global().at("ctn"); ModelFamilyRegistry::register_global(family) adds one.
using ModelFamilyRegistry = Registry<ModelFamily>;
template <>
std::vector<ModelFamily> builtin_kinds<ModelFamily>();

// A model of the registered family `family`, its settings checked against the family's
// schema first.
Model build_model(std::string_view family, Attributes settings);

// The built-in families, each defined beside its builder.
ModelFamily mlp_family();     // models/mlp.cpp
ModelFamily ctn_family();     // models/ctn.cpp
ModelFamily ladder_family();  // models/ladder.cpp

}  // namespace pens
