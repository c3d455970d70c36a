#include "pens/serialization/checkpoint.h"

#include <cmath>

#include "pens/ops/ir/error.h"
#include "pens/serialization/files.h"
#include "pens/serialization/sha256.h"

namespace pens {

namespace {

using json = nlohmann::json;

constexpr const char* kMagic = "pens-checkpoint";
constexpr size_t kMaxHeaderBytes = size_t{16} << 20;

// The tensors of a checkpoint, in payload order: (part, base) for the parameters' values
// and then each optimizer buffer, every one covering each parameter entry in turn.
std::vector<std::pair<std::string, float*>> parts_of(const ParamStore<float>& params, const OptimizerState& optimizer) {
  std::vector<std::pair<std::string, float*>> parts{{"value", const_cast<float*>(params.values().data())}};
  for (const StateBuffer& b : optimizer.buffers) {
    if (b.values.size() != params.values().size()) {
      fail("optimizer ", optimizer.kind, ": state buffer '", b.name, "' has ", b.values.size(), " elements, the parameters ",
           params.values().size());
    }
    parts.emplace_back(b.name, b.values.data());
  }
  return parts;
}

}  // namespace

void save_checkpoint(const std::string& path, const TrainingState& state, const ParamStore<float>& params,
                     const OptimizerState& optimizer, const std::function<void()>& before_rename) {
  json tensors = json::array();
  std::string payload;
  for (const auto& [part, base] : parts_of(params, optimizer)) {
    for (const ParamEntry& e : params.entries()) {
      tensors.push_back({{"name", e.name}, {"part", part}, {"shape", e.shape.to_vector()}});
      append_float32_le(payload, base + e.offset, e.shape.numel());
    }
  }
  const json header = {{"format", kMagic},
                       {"version", kCheckpointVersion},
                       {"step", state.step},
                       {"seed", state.seed},
                       {"config", state.config.is_null() ? json::object() : state.config},
                       {"elapsed_seconds", state.elapsed_seconds},
                       {"optimizer", optimizer.kind},
                       {"tensors", tensors},
                       {"payload_bytes", payload.size()},
                       {"payload_sha256", sha256_hex(payload)}};
  write_file_atomically(path, header.dump() + "\n" + payload, before_rename);
}

TrainingState load_checkpoint(const std::string& path, ParamStore<float>& params, const OptimizerState& optimizer) {
  const std::vector<std::pair<std::string, float*>> parts = parts_of(params, optimizer);
  const uint64_t expected_payload = parts.size() * 4 * static_cast<uint64_t>(params.numel());
  // Version 1 files are the same size for SGD, the only optimizer they knew.
  const std::string bytes = read_file(path, kMaxHeaderBytes + expected_payload);
  auto bad = [&](const auto&... what) { fail(path, ": ", what...); };
  const size_t newline = bytes.find('\n');
  if (newline == std::string::npos || newline > kMaxHeaderBytes) bad("no checkpoint header (truncated or not a checkpoint)");
  const json header = json::parse(bytes.substr(0, newline), nullptr, false);
  if (header.is_discarded()) bad("the header is not valid JSON");
  auto field = [&](const char* key) -> const json& {
    if (!header.is_object() || !header.contains(key)) bad("the header has no '", key, "'");
    return header[key];
  };
  if (field("format") != kMagic) bad("not a pens checkpoint");
  TrainingState state;
  if (!field("version").is_number_integer() || (field("version") != 1 && field("version") != kCheckpointVersion)) {
    bad("checkpoint version ", field("version").dump(), ", this pens reads 1 and ", kCheckpointVersion);
  }
  state.version = field("version").get<int64_t>();
  // Version 1 held SGD's momentum as the part "momentum".
  const std::string kind = state.version == 1 ? "sgd" : field("optimizer").is_string() ? field("optimizer").get<std::string>() : "";
  if (kind != optimizer.kind) {
    bad("holds the state of optimizer '", kind, "', this run's optimizer is '", optimizer.kind, "'");
  }
  if (!field("step").is_number_integer() || field("step").get<int64_t>() < 0) bad("'step' must be a non-negative integer");
  if (!field("seed").is_number_unsigned()) bad("'seed' must be a non-negative integer");
  if (!field("config").is_object()) bad("'config' must be an object");
  state.step = field("step").get<int64_t>();
  state.seed = field("seed").get<uint64_t>();
  state.config = field("config");
  if (header.contains("elapsed_seconds")) {
    const json& elapsed = header["elapsed_seconds"];
    if (!elapsed.is_number() || !std::isfinite(elapsed.get<double>()) || elapsed.get<double>() < 0) {
      bad("'elapsed_seconds' must be a non-negative number");
    }
    state.elapsed_seconds = elapsed.get<double>();
  }

  const std::string payload = bytes.substr(newline + 1);
  if (payload.size() != expected_payload || field("payload_bytes") != expected_payload) {
    bad("payload of ", payload.size(), " bytes, the model's parameters and optimizer state need ", expected_payload,
        " (truncated, or a checkpoint of another model)");
  }
  if (field("payload_sha256") != sha256_hex(payload)) bad("the payload does not match its checksum");

  const json& tensors = field("tensors");
  const size_t count = parts.size() * params.entries().size();
  if (!tensors.is_array() || tensors.size() != count) {
    bad("lists ", tensors.is_array() ? tensors.size() : 0, " tensors, the model and optimizer have ", count);
  }
  // Check every name and shape before touching the model's state.
  size_t t = 0;
  for (const auto& [part, base] : parts) {
    const std::string written = state.version == 1 && part == "velocity" ? "momentum" : part;
    for (const ParamEntry& e : params.entries()) {
      const json& entry = tensors[t++];
      if (!entry.is_object() || entry.value("name", "") != e.name || entry.value("part", "") != written ||
          entry.value("shape", json()) != json(e.shape.to_vector())) {
        bad("tensor ", t - 1, " is ", entry.dump(), ", expected ", written, " of '", e.name, "' ", e.shape.str());
      }
    }
  }
  size_t offset = 0;
  for (const auto& [part, base] : parts) {
    for (const ParamEntry& e : params.entries()) {
      read_float32_le(payload.data() + offset, base + e.offset, e.shape.numel());
      offset += 4 * static_cast<size_t>(e.shape.numel());
    }
  }
  return state;
}

}  // namespace pens
