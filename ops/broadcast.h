// Broadcasting, in one place. Elementwise binary ops and reductions both walk an
// "iteration shape" while reading or writing operands whose shapes broadcast to it:
// an operand's stride is 0 along the axes where it has size 1. Walking the same index
// triples in backward and ADDING into the operand's gradient is what undoes the
// broadcast: every output element that read a[ia] sends its gradient back to a[ia].
#pragma once

#include <array>
#include <cstdint>

#include "pens/ops/ir/shape.h"

namespace pens {

struct BroadcastWalk {
  std::array<int64_t, kMaxRank> dims{};  // iteration shape, padded on the left with 1s
  std::array<int64_t, kMaxRank> stride_a{};
  std::array<int64_t, kMaxRank> stride_b{};
};

// `a` and `b` must broadcast to `full` (aligned on the right).
BroadcastWalk make_walk(const Shape& full, const Shape& a, const Shape& b);

// Calls f(i, ia, ib) for every element i of the iteration shape (in row-major order),
// with ia, ib the offsets of the matching elements of a and b.
template <class F>
void walk(const BroadcastWalk& w, F&& f) {
  int64_t i = 0;
  for (int64_t i0 = 0; i0 < w.dims[0]; ++i0) {
    for (int64_t i1 = 0; i1 < w.dims[1]; ++i1) {
      for (int64_t i2 = 0; i2 < w.dims[2]; ++i2) {
        int64_t ia = i0 * w.stride_a[0] + i1 * w.stride_a[1] + i2 * w.stride_a[2];
        int64_t ib = i0 * w.stride_b[0] + i1 * w.stride_b[1] + i2 * w.stride_b[2];
        const int64_t sa = w.stride_a[3], sb = w.stride_b[3];
        for (int64_t i3 = 0; i3 < w.dims[3]; ++i3, ++i, ia += sa, ib += sb) f(i, ia, ib);
      }
    }
  }
}

}  // namespace pens
