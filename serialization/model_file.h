// The JSON model format (docs/model-format.md). Reading is safe against any input: every
// problem is an Error naming the file, the JSON path of the field (a JSON pointer such as
// /nodes/3/inputs/1) and what was expected. Writing is canonical: sorted keys, nodes in
// topological order, numbers that read back to the same bits, so a model read and
// written again reproduces its file byte for byte.
#pragma once

#include <cstdint>
#include <string>

#include "pens/serialization/model.h"

namespace pens {

inline constexpr int64_t kFormatVersion = 1;
inline constexpr int64_t kOpsetVersion = 1;

// Limits that keep a hostile file from exhausting memory before it is rejected.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 31;
inline constexpr uint64_t kMaxModelFileBytes = uint64_t{1} << 30;

enum class ValueStorage {
  Auto,     // inline up to kInlineLimit elements in all, a sidecar beyond
  Inline,   // "values" arrays in the JSON
  Sidecar,  // one little-endian float32 file beside the JSON, with size and SHA-256
  None,     // structure only
};
inline constexpr int64_t kInlineLimit = 4096;

// Reads a model file (and its sidecar, resolved relative to the file).
Model load_model(const std::string& path);
// Parses model JSON text. `source` names it in errors; `dir` is where a sidecar is found.
Model parse_model(const std::string& text, const std::string& source, const std::string& dir);

// Noise that nothing draws: the children alone draw noise, so in a model without a
// pseudo_ensemble section every annotation is dead and the model would train clean.
// Empty when there is none, else what is wrong, naming the first noisy node. pens train
// refuses such a model; pens fmt warns (pre-training and init_from read such files for
// their layers and values, where the noise does not matter).
std::string undrawn_noise(const Model& model);

// The nodes nothing uses: neither an output, a loss, a penalty's node or target, a moving
// average's source or parameter, a tree port, nor anything that feeds one of these. A
// valid file may have them (a model cut down by hand); pens fmt warns, naming them.
std::vector<std::string> unread_nodes(const Model& model);

struct ModelText {
  std::string json;          // canonical JSON text, ending in a newline
  std::string sidecar;       // sidecar bytes, empty when there is none
  std::string sidecar_name;  // the file name the JSON gives the sidecar
};
// `sidecar_name` is the file name the JSON refers to for the sidecar.
ModelText write_model(const Model& model, ValueStorage storage, const std::string& sidecar_name);
// Writes the JSON (and the sidecar "<stem>.weights-<16 hex digits of its SHA-256>.bin"
// beside it), each atomically, then removes the sidecars of this name the JSON no longer
// refers to. Named by content, the sidecar a model file refers to is never replaced under
// it: killed at any moment, the folder holds a model file that reads.
void save_model(const Model& model, const std::string& path, ValueStorage storage = ValueStorage::Auto);

// A list of noise annotations in the model format's form ([{"kind": "mask", "p": 0.25},
// ...]), checked against their kinds as annotations of `node` (defaults filled in).
// `source` and `path` name the list in errors.
std::vector<NoiseAnnotation> read_noise_list(const nlohmann::json& list, const std::string& source,
                                             const std::string& path, const Node& node);
nlohmann::json noise_list_json(const std::vector<NoiseAnnotation>& noise);
// A graph's moving averages as the model file's `moving_averages` holds them.
nlohmann::json averages_json(const std::vector<MovingAverage>& averages);

// An attribute value, and a set of attributes, as the model format writes them.
nlohmann::json attribute_json(const AttrValue& v);
nlohmann::json attributes_json(const Attributes& a);

}  // namespace pens
