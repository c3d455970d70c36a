// libFuzzer target for the IDX reader (MNIST's images and labels): any bytes must either
// parse or be refused with a pens::Error. The first byte picks the rank the caller expects
// (labels 1, images 3), the rest is the file. What parses must hold exactly the elements
// its header promises.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pens/ops/ir/error.h"
#include "pens/serialization/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int expected_rank = data[0] % 2 == 0 ? 1 : 3;
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const pens::IdxArray a = pens::parse_idx(bytes, "fuzz.idx", expected_rank);
    uint64_t elements = 1;
    for (const uint32_t d : a.dims) elements *= d;
    if (a.dims.size() != static_cast<size_t>(expected_rank) || a.data.size() != elements) __builtin_trap();
  } catch (const pens::Error&) {
    // Refused with a message: the expected outcome for bad input.
  }
  return 0;
}
