#include "pens/models/family.h"

namespace pens {

template <>
std::vector<ModelFamily> builtin_kinds<ModelFamily>() {
  return {mlp_family(), ctn_family(), ladder_family()};
}

Model build_model(std::string_view family, Attributes settings) {
  const ModelFamily& f = ModelFamilyRegistry::global().at(family);
  normalize_attrs(f.settings, settings, "model family " + f.name);
  return f.build(settings);
}

}  // namespace pens
