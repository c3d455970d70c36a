// libFuzzer target for the training configs (pens train's MNIST and tree configs,
// pens pretrain's): any bytes must either parse or be refused with a pens::Error. A
// config that parses must also survive its own round trip: written back with to_json and
// read again, it must give the same JSON (a resume compares configs that way).
#include <cstddef>
#include <cstdint>
#include <string>

#include "pens/ops/ir/error.h"
#include "pens/serialization/json_text.h"
#include "pens/train/config/pretrain_config.h"
#include "pens/train/config/train_config.h"
#include "pens/train/config/tree_config.h"
#include "pens/train/loop/run_kind.h"

namespace {

template <class Parse>
void parse_and_round_trip(const nlohmann::json& j, Parse parse) {
  try {
    const nlohmann::json written = to_json(parse(j, "fuzz.json"));
    if (to_json(parse(written, "rewritten.json")) != written) __builtin_trap();
  } catch (const pens::Error&) {
    // Refused with a message: the expected outcome for bad input.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json j;
  try {
    j = pens::parse_json_text(text, "fuzz.json");
  } catch (const pens::Error&) {
    return 0;
  }
  if (pens::run_kind_of(j) == "trees") {
    parse_and_round_trip(j, pens::parse_tree_config);
  } else {
    parse_and_round_trip(j, pens::parse_train_config);
    parse_and_round_trip(j, pens::parse_pretrain_config);
  }
  return 0;
}
