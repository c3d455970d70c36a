// Views of tensor memory owned by someone else (the tape's arena, a parameter store).
// Row-major; kernels see them as Eigen maps. Copying a view copies a pointer and a
// Shape, never data, and never allocates.
#pragma once

#include <Eigen/Core>
#include <type_traits>

#include "pens/ops/ir/shape.h"

namespace pens {

// Buffers planned by pens (tape arenas, parameter stores) start every tensor on a
// 64-byte boundary, so vector loads over one never straddle its neighbour.
inline constexpr int64_t kAlignElements = 16;
inline int64_t aligned_size(int64_t n) { return (n + kAlignElements - 1) / kAlignElements * kAlignElements; }

template <class T>
struct TensorView {
  using Scalar = std::remove_const_t<T>;
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Array = Eigen::Array<Scalar, Eigen::Dynamic, 1>;
  using MatrixMap =
      std::conditional_t<std::is_const_v<T>, Eigen::Map<const Matrix>, Eigen::Map<Matrix>>;
  using ArrayMap =
      std::conditional_t<std::is_const_v<T>, Eigen::Map<const Array>, Eigen::Map<Array>>;

  T* data = nullptr;
  Shape shape;

  int64_t size() const { return shape.numel(); }
  explicit operator bool() const { return data != nullptr; }
  T& operator[](int64_t i) const { return data[i]; }

  // The tensor as a rows x cols matrix (last dimension = columns).
  MatrixMap mat() const { return MatrixMap(data, shape.rows(), shape.cols()); }
  MatrixMap mat(int64_t rows, int64_t cols) const { return MatrixMap(data, rows, cols); }
  // All elements as one column array, for elementwise work.
  ArrayMap arr() const { return ArrayMap(data, size()); }

  operator TensorView<const T>() const
    requires(!std::is_const_v<T>)
  {
    return {data, shape};
  }
};

}  // namespace pens
