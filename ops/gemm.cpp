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
// Column pieces: at least this wide (each piece repacks its row panel of A), and at
// least kMinPanelWork multiply-adds.
constexpr int64_t kMinPiece = 64;
// Eigen's kernel computes C in groups of this many columns (gebp's nr), the columns
// left over one by one: a cut at a multiple of it leaves every column in the same kind
// of group, and so with the same bits (tests/ops/test_parallel.cpp).
constexpr int64_t kColumnGroup = 4;
static_assert(Eigen::internal::gebp_traits<float, float>::nr == kColumnGroup &&
                  Eigen::internal::gebp_traits<double, double>::nr == kColumnGroup,
              "column pieces are cut at multiples of Eigen's column group");

// Row panels for an m×n result with inner dimension k.
int64_t panel_count(int64_t m, int64_t n, int64_t k) {
  const int64_t by_work = m * n * k / kMinPanelWork;
  return std::clamp<int64_t>(std::min(std::max(m, n) / kMinPanel, by_work), 1, kMaxPanels);
}

// Start of panel p of `parts` over `size`, on a multiple of `align` where it can be.
int64_t panel_start(int64_t size, int64_t parts, int64_t p, int64_t align) {
  if (p == 0) return 0;
  if (p >= parts) return size;
  return std::min(size, (size * p / parts + align / 2) / align * align);
}

// Pieces each of `rows` row panels (of about `panel_rows` rows) is cut into along its n
// columns so that `threads` threads share the work evenly: the fewest that give at least
// two pieces a thread with every thread's share within 10 % of the even one or, where
// pieces that small are not allowed, the allowed count that shares best. One piece on one
// thread.
int64_t column_pieces(int64_t rows, int64_t panel_rows, int64_t n, int64_t k, int threads) {
  if (threads <= 1) return 1;
  const int64_t by_width = n / kMinPiece;
  const int64_t by_work = panel_rows * n * k / kMinPanelWork;
  const int64_t most = std::clamp<int64_t>(std::min(by_width, by_work), 1, kMaxPanels);
  // The share of the threads' time the pieces keep busy, all pieces taken as equal.
  const auto busy = [&](int64_t pieces) {
    const int64_t tasks = rows * pieces, rounds = (tasks + threads - 1) / threads;
    return static_cast<double>(tasks) / static_cast<double>(rounds * threads);
  };
  int64_t best = 1;
  for (int64_t pieces = 1; pieces <= most; ++pieces) {
    if (busy(pieces) >= 0.9 && rows * pieces >= 2 * threads) return pieces;
    if (busy(pieces) > busy(best) + 1e-9) best = pieces;
  }
  return best;
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
  // Row panels fix the bits (a row cut changes them); the column pieces within a panel
  // do not, and follow the thread count.
  const int64_t rows = n >= m ? 1 : panel_count(m, n, k);
  const int64_t panel_rows = panel_start(m, rows, 1, 16);
  const int64_t pieces = column_pieces(rows, panel_rows, n, k, threads());
  parallel_for(rows * pieces, [&](int64_t task) {
    const int64_t r = task / pieces, q = task % pieces;
    const int64_t row = panel_start(m, rows, r, 16), height = panel_start(m, rows, r + 1, 16) - row;
    const int64_t col = panel_start(n, pieces, q, kColumnGroup);
    const int64_t width = panel_start(n, pieces, q + 1, kColumnGroup) - col;
    const GemmOperand<T> piece = block(c, row, col, height, width);
    if (!accumulate) {
      for (int64_t j = 0; j < piece.cols; ++j) std::fill_n(piece.data + j * piece.stride, piece.rows, T(0));
    }
    accumulate_product(piece, block(a, row, 0, height, k), block(b, 0, col, k, width));
  });
}

template void gemm_operands<float>(const GemmOperand<float>&, const GemmOperand<const float>&,
                                   const GemmOperand<const float>&, bool);
template void gemm_operands<double>(const GemmOperand<double>&, const GemmOperand<const double>&,
                                    const GemmOperand<const double>&, bool);

}  // namespace pens
