#include "pens/ops/precision.h"

#include "pens/ops/ir/error.h"

namespace pens {

Precision parse_precision(std::string_view text, std::string_view where) {
  if (text == "float32") return Precision::Float32;
  if (text == "bfloat16") return Precision::BFloat16;
  fail(where, ": precision is \"float32\" or \"bfloat16\", got \"", text, "\"");
}

const char* precision_name(Precision p) { return p == Precision::BFloat16 ? "bfloat16" : "float32"; }

void require_precision(Precision p, std::string_view what) {
  if (p != Precision::BFloat16) return;
  if (const std::string why = bfloat16_unavailable(); !why.empty()) {
    fail(what, ": precision \"bfloat16\" cannot run here: ", why, " (\"float32\" runs everywhere)");
  }
}

}  // namespace pens
