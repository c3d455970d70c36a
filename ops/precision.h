// The precision of a tape's matrix products: float32, or bfloat16 operands with float32
// accumulation (oneDNN's matmul; docs/performance.md, "bfloat16 products").
//
// In bfloat16 only the products of matmul and affine change: each operand is rounded to
// bfloat16 (8 bits of mantissa) as it is read, the sums are float32, and the result is
// float32. Parameters, gradients, optimizer state, elementwise ops, losses and penalties
// stay float32, and so do checkpoints and model files. Tapes in double (gradient checks)
// always compute in double.
#pragma once

#include <string>
#include <string_view>

namespace pens {

enum class Precision { Float32, BFloat16 };

// "float32" or "bfloat16"; anything else fails, naming `where` and the value.
Precision parse_precision(std::string_view text, std::string_view where);
const char* precision_name(Precision p);

// Why bfloat16 products cannot run here ("" when they can): pens built without oneDNN
// (meson -Ddnnl), or a CPU whose instructions oneDNN has no bfloat16 matmul for.
std::string bfloat16_unavailable();

// Fails with bfloat16_unavailable()'s reason, naming `what` (the config that asks for it),
// when `p` is bfloat16 and it cannot run here.
void require_precision(Precision p, std::string_view what);

}  // namespace pens
