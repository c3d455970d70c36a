#include "pens/train/config/config_file.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "pens/ops/ir/error.h"
#include "pens/serialization/json_text.h"

namespace pens {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string chain_text(const std::vector<fs::path>& chain) {
  std::string out;
  for (const fs::path& p : chain) out += (out.empty() ? "" : " -> ") + p.filename().string();
  return out;
}

// The config at chain.back(), its bases resolved; `chain` is the configs read so far,
// the first the one asked for.
json resolve(std::vector<fs::path>& chain) {
  const fs::path path = chain.back();
  const std::string name = path.string();
  json config = read_json_file(name);
  if (!config.is_object()) return config;  // the kind's parser says what is wrong
  const auto base = config.find("base");
  if (base == config.end()) return config;
  if (!base->is_string() || base->get<std::string>().empty()) {
    fail(name, ": base must be a string, the file name of another config in the same folder");
  }
  const std::string base_name = base->get<std::string>();
  if (fs::path(base_name).has_parent_path()) {
    fail(name, ": base \"", base_name, "\" is not in the config's own folder; a base must be, so that the paths "
         "both configs hold (model, data.dir) are read from the same place");
  }
  const fs::path base_path = path.parent_path() / base_name;
  if (!fs::is_regular_file(base_path)) fail(name, ": base \"", base_name, "\": no such file beside it");
  if (std::ranges::any_of(chain, [&](const fs::path& p) { return fs::equivalent(p, base_path); })) {
    chain.push_back(base_path);
    fail(name, ": base \"", base_name, "\" makes a cycle: ", chain_text(chain));
  }
  if (static_cast<int>(chain.size()) > kMaxConfigBases) {
    fail(name, ": more than ", kMaxConfigBases, " bases in a chain (", chain_text(chain), " -> ", base_name, ")");
  }
  chain.push_back(base_path);
  json merged = resolve(chain);
  if (!merged.is_object()) fail(base_path.string(), ": a base config must be a JSON object (read as the base of ", name, ")");
  merged.erase("description");  // a config describes itself
  config.erase("base");
  merged.merge_patch(config);
  return merged;
}

}  // namespace

json read_config_file(const std::string& path) {
  std::vector<fs::path> chain{fs::path(path)};
  return resolve(chain);
}

}  // namespace pens
