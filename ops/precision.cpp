#include "pens/ops/precision.h"

#include "pens/ops/ir/error.h"

namespace pens {

Precision parse_precision(std::string_view text, std::string_view where) {
  for (const Precision p : {Precision::Float32, Precision::Float32OneDnn, Precision::BFloat16}) {
    if (text == precision_name(p)) return p;
  }
  fail(where, ": precision is \"float32\", \"float32-onednn\" or \"bfloat16\", got \"", text, "\"");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::Float32: return "float32";
    case Precision::Float32OneDnn: return "float32-onednn";
    case Precision::BFloat16: return "bfloat16";
  }
  return "?";
}

void require_precision(Precision p, std::string_view what) {
  if (p == Precision::Float32) return;
  const std::string why = p == Precision::BFloat16 ? bfloat16_unavailable() : onednn_unavailable();
  if (!why.empty()) {
    fail(what, ": precision \"", precision_name(p), "\" cannot run here: ", why, " (\"float32\" runs everywhere)");
  }
}

}  // namespace pens
