#include "pens/models/treebank_source.h"

namespace pens {

template <>
std::vector<TreebankSourceKind> builtin_kinds<TreebankSourceKind>() {
  return {sst_source(), bracketed_source()};
}

SentimentTreebank load_treebank(const std::string& source, const std::string& dir, Attributes settings) {
  const TreebankSourceKind& kind = TreebankSourceRegistry::global().at(source);
  normalize_attrs(kind.settings, settings, "treebank source " + kind.name);
  return kind.load(dir, settings);
}

}  // namespace pens
