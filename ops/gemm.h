// Matrix products for the kernels: C = A·B or C += A·B over the thread pool
// (ops/parallel.h), with packing buffers that are allocated once per thread and reused.
//
// Eigen's own product allocates its packing buffers on every call above 128 KB, and on
// this machine that costs a page fault per page each time (a pea step took twice as
// long once its products were cut in panels). Here C is cut into panels, each computed
// with Eigen 3.4's single-threaded GEMM kernel and packing routines, driven as Eigen's
// sequential driver (general_matrix_matrix_product) drives them, with a thread's own
// buffers, so a step allocates nothing after its first run, on any number of threads.
// The driver is ours for one reason: Eigen's packs B again for every panel, where a
// thread here packs its piece of B once per product and keeps it for every panel of
// that piece it computes (a layer's product has 4 panels).
//
// A product gives the same bits on any number of threads. C (column-major, as the kernel
// sees it) is cut into row panels by its shape alone, when it has more rows than columns:
// panels at least 192 rows high holding at least 2^18 multiply-adds, so small products
// stay whole. A row cut changes the bits (which rows share a micro-kernel), so these cuts
// are fixed. Each panel is then cut along its columns into as many pieces as the thread
// count needs to share the work evenly (at least 64 columns each; one on one thread): a
// column cut at a multiple of 4 leaves every element's bits as they were (Eigen's kernel
// computes columns in groups of 4, each the same wherever it lies), which
// tests/ops/test_parallel.cpp checks. Each piece repacks its panel of A, so pieces are
// only made where threads would otherwise wait (5 panels on 2 threads, a whole product).
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <type_traits>

#include "pens/ops/precision.h"

namespace pens {

// A matrix operand as the kernel reads it: element (i, j) is
// data[i * stride + j] when row-major, data[i + j * stride] otherwise.
template <class T>
struct GemmOperand {
  T* data;
  int64_t rows, cols, stride;
  bool row_major;
};

// c = a·b, or c += a·b when accumulate; shapes must agree (checked by the callers' infer).
// A non-null bias (c.cols values, one per column of c) is added to every row of c: where
// Eigen's kernel sums the whole inner dimension in one block, C starts from it instead
// of from zeros, which saves a pass over C and gives the bits of adding it after.
// Precision::BFloat16 and Float32OneDnn run a float product on oneDNN (gemm_onednn);
// double products are always double, on Eigen's kernel.
template <class T>
void gemm_operands(const GemmOperand<T>& c, const GemmOperand<const T>& a, const GemmOperand<const T>& b,
                   bool accumulate, const T* bias = nullptr, Precision precision = Precision::Float32);

// The same on oneDNN's matmul (ops/gemm_onednn.cpp), in bfloat16 (the operands rounded to
// bfloat16, the sums and the result float32) or float32. Fails where onednn_unavailable()
// or bfloat16_unavailable() says why.
void gemm_onednn(const GemmOperand<float>& c, const GemmOperand<const float>& a, const GemmOperand<const float>& b,
                 bool accumulate, const float* bias, Precision precision);
// How many oneDNN primitives the products have made in this process (a thread makes one
// for each shape of piece it meets first).
int64_t onednn_primitives_made();

// The operand an Eigen expression with direct access is (a map, its transpose, a block).
template <class E>
auto gemm_operand(E&& e) {
  using X = std::remove_cvref_t<E>;
  using T = std::conditional_t<std::is_const_v<std::remove_pointer_t<decltype(e.data())>>, const typename X::Scalar,
                               typename X::Scalar>;
  eigen_assert(e.innerStride() == 1);
  return GemmOperand<T>{e.data(), e.rows(), e.cols(), e.outerStride(), (X::Flags & Eigen::RowMajorBit) != 0};
}

// c = x·y, or c += x·y, for Eigen expressions (c writable).
template <class C, class X, class Y>
void gemm(C&& c, const X& x, const Y& y, bool accumulate, Precision precision = Precision::Float32) {
  using T = typename std::remove_cvref_t<C>::Scalar;
  const auto a = gemm_operand(x);
  const auto b = gemm_operand(y);
  gemm_operands<T>(gemm_operand(c), GemmOperand<const T>{a.data, a.rows, a.cols, a.stride, a.row_major},
                   GemmOperand<const T>{b.data, b.rows, b.cols, b.stride, b.row_major}, accumulate, nullptr,
                   precision);
}

// c = x·y + bias, the bias (one value per column of c) added to every row.
template <class C, class X, class Y, class T>
void gemm_bias(C&& c, const X& x, const Y& y, const T* bias, Precision precision = Precision::Float32) {
  const auto a = gemm_operand(x);
  const auto b = gemm_operand(y);
  gemm_operands<T>(gemm_operand(c), GemmOperand<const T>{a.data, a.rows, a.cols, a.stride, a.row_major},
                   GemmOperand<const T>{b.data, b.rows, b.cols, b.stride, b.row_major}, false, bias, precision);
}

}  // namespace pens
