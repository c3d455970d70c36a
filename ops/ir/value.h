// What a node produces: a shape and an element type. Index values (labels, gather
// indices, word ids) live in the same buffers as real values, as exact integers.
#pragma once

#include <cstdint>

#include "pens/ops/ir/shape.h"

namespace pens {

enum class DType : uint8_t { Real, Index };

inline const char* dtype_name(DType t) { return t == DType::Real ? "real" : "index"; }

struct ValueInfo {
  Shape shape;
  DType dtype = DType::Real;
  bool operator==(const ValueInfo& o) const { return shape == o.shape && dtype == o.dtype; }
};

}  // namespace pens
