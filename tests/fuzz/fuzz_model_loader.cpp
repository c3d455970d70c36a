// libFuzzer target for the model loader: any bytes must either load or be refused with a
// pens::Error. Anything else (a crash, a sanitizer report, another exception, a leak)
// is a bug. A model that loads is also written back and, if it declares a
// pseudo-ensemble, built into its training graph.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pens/graph/pseudo_ensemble.h"
#include "pens/ops/ir/error.h"
#include "pens/serialization/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    // No sidecar is ever found: the directory does not exist.
    const pens::Model model = pens::parse_model(text, "fuzz.json", "/nonexistent-pens-fuzz-dir");
    const pens::ModelText written = pens::write_model(model, pens::ValueStorage::Inline, "");
    (void)pens::parse_model(written.json, "rewritten.json", "/nonexistent-pens-fuzz-dir");
    if (model.ensemble) (void)pens::build_pseudo_ensemble(model.graph, *model.ensemble);
  } catch (const pens::Error&) {
    // Refused with a message: the expected outcome for bad input.
  }
  return 0;
}
