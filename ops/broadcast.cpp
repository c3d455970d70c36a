#include "pens/ops/broadcast.h"

namespace pens {

namespace {
std::array<int64_t, kMaxRank> strides_for(const Shape& full, const Shape& s) {
  std::array<int64_t, kMaxRank> strides{};
  int64_t stride = 1;
  for (int i = s.rank - 1; i >= 0; --i) {
    const int padded = kMaxRank - s.rank + i;
    strides[static_cast<size_t>(padded)] = (s[i] == 1 && full[full.rank - s.rank + i] != 1) ? 0 : stride;
    stride *= s[i];
  }
  return strides;
}
}  // namespace

BroadcastWalk make_walk(const Shape& full, const Shape& a, const Shape& b) {
  BroadcastWalk w;
  w.dims.fill(1);
  for (int i = 0; i < full.rank; ++i) w.dims[static_cast<size_t>(kMaxRank - full.rank + i)] = full[i];
  w.stride_a = strides_for(full, a);
  w.stride_b = strides_for(full, b);
  return w;
}

}  // namespace pens
