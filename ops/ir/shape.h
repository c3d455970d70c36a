// Shapes of tensors: up to four dimensions, row-major, stored inline (no allocation,
// so views can be copied freely inside kernels). A dimension of kBatch in a declared
// input shape means "the batch size", bound when a graph is compiled.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace pens {

inline constexpr int kMaxRank = 4;
inline constexpr int64_t kBatch = -1;

struct Shape {
  int rank = 0;
  std::array<int64_t, kMaxRank> dims{};

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);
  static Shape from(std::span<const int64_t> d);

  int64_t operator[](int axis) const { return dims[static_cast<size_t>(axis)]; }
  int64_t& operator[](int axis) { return dims[static_cast<size_t>(axis)]; }

  // Number of elements; 1 for a scalar (rank 0).
  int64_t numel() const;
  // The tensor seen as a matrix: last dimension is columns, the rest are rows.
  int64_t cols() const { return rank == 0 ? 1 : dims[static_cast<size_t>(rank - 1)]; }
  int64_t rows() const { return cols() == 0 ? 0 : numel() / cols(); }
  // Dimensions before `axis`, the axis itself, and after it: how concat, slice and
  // gather see a tensor of any rank.
  int64_t outer(int axis) const;
  int64_t inner(int axis) const;

  bool has_batch() const;
  Shape bind_batch(int64_t batch) const;
  std::vector<int64_t> to_vector() const;
  std::string str() const;

  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
};

}  // namespace pens
