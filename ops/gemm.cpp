#include "pens/ops/gemm.h"

#include <algorithm>
#include <vector>

#include "pens/ops/parallel.h"

static_assert(EIGEN_VERSION_AT_LEAST(3, 4, 0), "ops/gemm.cpp calls Eigen 3.4's GEMM kernel directly");

namespace pens {

namespace {

constexpr int64_t kMaxPanels = 64;
constexpr int64_t kMinPanel = 192;
constexpr int64_t kMinPanelWork = int64_t{1} << 18;

// Panels for an m×n result with inner dimension k.
int64_t panel_count(int64_t m, int64_t n, int64_t k) {
  const int64_t by_work = m * n * k / kMinPanelWork;
  return std::clamp<int64_t>(std::min(std::max(m, n) / kMinPanel, by_work), 1, kMaxPanels);
}

// Start of panel p of `parts` over `size`, on a multiple of 16 where it can be.
int64_t panel_start(int64_t size, int64_t parts, int64_t p) {
  if (p == 0) return 0;
  if (p >= parts) return size;
  return std::min(size, (size * p / parts + 8) / 16 * 16);
}

// A thread's packing buffers, grown to the largest product it has run and kept.
template <class T>
struct Workspace {
  std::vector<T, Eigen::aligned_allocator<T>> a, b;
};

template <class T>
Workspace<T>& workspace() {
  thread_local Workspace<T> w;
  return w;
}

// Eigen's blocking (cache block sizes) for one product, pointing at the thread's buffers.
template <class T>
class Blocking : public Eigen::internal::level3_blocking<T, T> {
 public:
  // rows, cols: of the column-major product Eigen computes.
  Blocking(Eigen::Index rows, Eigen::Index cols, Eigen::Index depth) {
    this->m_mc = rows;
    this->m_nc = cols;
    this->m_kc = depth;
    Eigen::internal::computeProductBlockingSizes<T, T, 1>(this->m_kc, this->m_mc, this->m_nc, Eigen::Index{1});
    Workspace<T>& w = workspace<T>();
    const auto grow = [](auto& buffer, Eigen::Index size) {
      if (static_cast<Eigen::Index>(buffer.size()) < size) buffer.resize(static_cast<size_t>(size));
    };
    grow(w.a, this->m_mc * this->m_kc);
    grow(w.b, this->m_kc * this->m_nc);
    this->m_blockA = w.a.data();
    this->m_blockB = w.b.data();
  }
};

// Element offset of (row, col) in an operand.
template <class T>
int64_t offset(const GemmOperand<T>& x, int64_t row, int64_t col) {
  return x.row_major ? row * x.stride + col : row + col * x.stride;
}

template <class T>
GemmOperand<T> block(const GemmOperand<T>& x, int64_t row, int64_t col, int64_t rows, int64_t cols) {
  return {x.data + offset(x, row, col), rows, cols, x.stride, x.row_major};
}

// c += a·b on one thread, c column-major: Eigen's kernel for the operands' storage orders.
template <class T, int OrderA, int OrderB>
void kernel(const GemmOperand<T>& c, const GemmOperand<const T>& a, const GemmOperand<const T>& b) {
  Blocking<T> blocking(c.rows, c.cols, a.cols);
  Eigen::internal::general_matrix_matrix_product<Eigen::Index, T, OrderA, false, T, OrderB, false, Eigen::ColMajor,
                                                 1>::run(c.rows, c.cols, a.cols, a.data, a.stride, b.data, b.stride,
                                                         c.data, 1, c.stride, T(1), blocking);
}

template <class T>
void accumulate_product(const GemmOperand<T>& c, const GemmOperand<const T>& a, const GemmOperand<const T>& b) {
  if (c.rows == 0 || c.cols == 0 || a.cols == 0) return;
  using Eigen::ColMajor, Eigen::RowMajor;
  if (a.row_major && b.row_major) kernel<T, RowMajor, RowMajor>(c, a, b);
  if (a.row_major && !b.row_major) kernel<T, RowMajor, ColMajor>(c, a, b);
  if (!a.row_major && b.row_major) kernel<T, ColMajor, RowMajor>(c, a, b);
  if (!a.row_major && !b.row_major) kernel<T, ColMajor, ColMajor>(c, a, b);
}

template <class T>
GemmOperand<T> transposed(const GemmOperand<T>& x) {
  return {x.data, x.cols, x.rows, x.stride, !x.row_major};
}

}  // namespace

template <class T>
void gemm_operands(const GemmOperand<T>& c_in, const GemmOperand<const T>& a_in, const GemmOperand<const T>& b_in,
                   bool accumulate) {
  // The kernel writes column-major results; a row-major C is computed as Cᵀ = Bᵀ·Aᵀ.
  const bool flip = c_in.row_major;
  const GemmOperand<T> c = flip ? transposed(c_in) : c_in;
  const GemmOperand<const T> a = flip ? transposed(b_in) : a_in;
  const GemmOperand<const T> b = flip ? transposed(a_in) : b_in;
  const int64_t m = c.rows, n = c.cols, k = a.cols;
  const int64_t parts = panel_count(m, n, k);
  const bool by_columns = n >= m;
  const int64_t side = by_columns ? n : m;
  parallel_for(parts, [&](int64_t p) {
    const int64_t start = panel_start(side, parts, p), width = panel_start(side, parts, p + 1) - start;
    const GemmOperand<T> panel = by_columns ? block(c, 0, start, m, width) : block(c, start, 0, width, n);
    if (!accumulate) {
      for (int64_t j = 0; j < panel.cols; ++j) std::fill_n(panel.data + j * panel.stride, panel.rows, T(0));
    }
    if (by_columns) {
      accumulate_product(panel, a, block(b, 0, start, k, width));
    } else {
      accumulate_product(panel, block(a, start, 0, width, k), b);
    }
  });
}

template void gemm_operands<float>(const GemmOperand<float>&, const GemmOperand<const float>&,
                                   const GemmOperand<const float>&, bool);
template void gemm_operands<double>(const GemmOperand<double>&, const GemmOperand<const double>&,
                                    const GemmOperand<const double>&, bool);

}  // namespace pens
