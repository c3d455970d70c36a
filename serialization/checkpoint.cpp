#include "serialization/checkpoint.h"


#include "graph/error.h"
#include "serialization/files.h"
#include "serialization/model_file.h"
#include "serialization/sha256.h"

namespace pens {

namespace {

using json = nlohmann::json;

constexpr const char* kMagic = "pens-checkpoint";
constexpr int64_t kVersion = 1;
constexpr size_t kMaxHeaderBytes = size_t{16} << 20;

}  // namespace

void save_checkpoint(const std::string& path, const TrainingState& state, const ParamStore<float>& params,
                     const Sgd& optimizer, const std::function<void()>& before_rename) {
  json tensors = json::array();
  std::string payload;
  for (const char* part : {"value", "momentum"}) {
    const float* base = std::string(part) == "value" ? params.values().data() : optimizer.state().data();
    for (const ParamEntry& e : params.entries()) {
      tensors.push_back({{"name", e.name}, {"part", part}, {"shape", e.shape.to_vector()}});
      append_float32_le(payload, base + e.offset, e.shape.numel());
    }
  }
  const json header = {{"format", kMagic},
                       {"version", kVersion},
                       {"step", state.step},
                       {"seed", state.seed},
                       {"config", state.config.is_null() ? json::object() : state.config},
                       {"tensors", tensors},
                       {"payload_bytes", payload.size()},
                       {"payload_sha256", sha256_hex(payload)}};
  write_file_atomically(path, header.dump() + "\n" + payload, before_rename);
}

TrainingState load_checkpoint(const std::string& path, ParamStore<float>& params, Sgd& optimizer) {
  const uint64_t expected_payload = 2 * 4 * static_cast<uint64_t>(params.numel());
  const std::string bytes = read_file(path, kMaxHeaderBytes + expected_payload);
  auto bad = [&](const auto&... what) { fail(path, ": ", what...); };
  const size_t newline = bytes.find('\n');
  if (newline == std::string::npos || newline > kMaxHeaderBytes) bad("no checkpoint header (truncated or not a checkpoint)");
  json header;
  try {
    header = json::parse(bytes.substr(0, newline));
  } catch (const json::exception& e) {
    bad("the header is not valid JSON: ", e.what());
  }
  auto field = [&](const char* key) -> const json& {
    if (!header.is_object() || !header.contains(key)) bad("the header has no '", key, "'");
    return header[key];
  };
  if (field("format") != kMagic) bad("not a pens checkpoint");
  if (field("version") != kVersion) bad("checkpoint version ", field("version").dump(), ", this pens reads ", kVersion);
  TrainingState state;
  if (!field("step").is_number_integer() || field("step").get<int64_t>() < 0) bad("'step' must be a non-negative integer");
  if (!field("seed").is_number_unsigned()) bad("'seed' must be a non-negative integer");
  if (!field("config").is_object()) bad("'config' must be an object");
  state.step = field("step").get<int64_t>();
  state.seed = field("seed").get<uint64_t>();
  state.config = field("config");

  const std::string payload = bytes.substr(newline + 1);
  if (payload.size() != expected_payload || field("payload_bytes") != expected_payload) {
    bad("payload of ", payload.size(), " bytes, the model's parameters and momentum need ", expected_payload,
        " (truncated, or a checkpoint of another model)");
  }
  if (field("payload_sha256") != sha256_hex(payload)) bad("the payload does not match its checksum");

  const json& tensors = field("tensors");
  if (!tensors.is_array() || tensors.size() != 2 * params.entries().size()) {
    bad("lists ", tensors.is_array() ? tensors.size() : 0, " tensors, the model has ", 2 * params.entries().size());
  }
  // Check every name and shape before touching the model's state.
  size_t t = 0;
  for (const char* part : {"value", "momentum"}) {
    for (const ParamEntry& e : params.entries()) {
      const json& entry = tensors[t++];
      if (!entry.is_object() || entry.value("name", "") != e.name || entry.value("part", "") != part ||
          entry.value("shape", json()) != json(e.shape.to_vector())) {
        bad("tensor ", t - 1, " is ", entry.dump(), ", expected ", part, " of '", e.name, "' ", e.shape.str());
      }
    }
  }
  size_t offset = 0;
  for (const char* part : {"value", "momentum"}) {
    float* base = std::string(part) == "value" ? params.values().data() : optimizer.state().data();
    for (const ParamEntry& e : params.entries()) {
      read_float32_le(payload.data() + offset, base + e.offset, e.shape.numel());
      offset += 4 * static_cast<size_t>(e.shape.numel());
    }
  }
  return state;
}

}  // namespace pens
