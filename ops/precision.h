// The precision of a tape's matrix products, and their kernel: float32 on pens' own
// driver of Eigen's kernel (the default), float32 on oneDNN's matmul, or bfloat16 operands
// with float32 accumulation on oneDNN's matmul (docs/performance.md, "bfloat16 products").
//
// float32-onednn computes what float32 computes with the sums in another order: the
// results differ in their last bits (and a run's trajectory with them), not in precision.
// Where the CPU runs oneDNN's float kernel faster than Eigen's (AVX-512: 1.3-1.4x on the
// step's products, docs/performance.md), it is the faster float32; float32 stays the
// default because every recorded run, and the comparisons of the speed work, have its bits.
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

enum class Precision { Float32, Float32OneDnn, BFloat16 };

// "float32", "float32-onednn" or "bfloat16"; anything else fails, naming `where` and the value.
Precision parse_precision(std::string_view text, std::string_view where);
const char* precision_name(Precision p);

// Why products on oneDNN cannot run here ("" when they can): pens built without it
// (meson -Ddnnl).
std::string onednn_unavailable();
// Why bfloat16 products cannot run here ("" when they can): no oneDNN, or a CPU whose
// instructions oneDNN has no bfloat16 matmul for.
std::string bfloat16_unavailable();

// Fails with the reason, naming `what` (the config that asks for it), when `p` cannot run here.
void require_precision(Precision p, std::string_view what);

}  // namespace pens
