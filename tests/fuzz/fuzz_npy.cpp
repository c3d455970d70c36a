// libFuzzer target for the .npy reader (a data source's NumPy arrays): any bytes must
// either parse or be refused with a pens::Error. What parses must hold exactly the elements
// its shape promises.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pens/ops/ir/error.h"
#include "pens/serialization/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const pens::NpyArray a = pens::parse_npy(bytes, "fuzz.npy");
    uint64_t elements = 1;
    for (const int64_t d : a.shape) {
      if (d < 0) __builtin_trap();
      elements *= static_cast<uint64_t>(d);
    }
    if (a.data.size() != elements) __builtin_trap();
  } catch (const pens::Error&) {
    // Refused with a message: the expected outcome for bad input.
  }
  return 0;
}
