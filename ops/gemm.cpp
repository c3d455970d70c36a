#include "pens/ops/gemm.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <mutex>
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

// Row panels for an m×n result with inner dimension k: one where n ≥ m (the column
// pieces share such a product out).
int64_t panel_count(int64_t m, int64_t n, int64_t k) {
  if (n >= m) return 1;
  const int64_t by_work = m * n * k / kMinPanelWork;
  return std::clamp<int64_t>(std::min(m / kMinPanel, by_work), 1, kMaxPanels);
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

// Eigen's cache blocking of one panel product (rows × cols, inner dimension depth), as
// its sequential GEMM uses it: blocks of mc rows, nc columns and kc of the depth.
struct BlockSizes {
  Eigen::Index mc, nc, kc;
};

template <class T>
BlockSizes block_sizes(Eigen::Index rows, Eigen::Index cols, Eigen::Index depth) {
  Eigen::Index kc = depth, mc = rows, nc = cols;
  Eigen::internal::computeProductBlockingSizes<T, T, 1>(kc, mc, nc, Eigen::Index{1});
  return {std::min(rows, mc), std::min(cols, nc), kc};
}

// Which product gemm_operands is running, so that a thread's packed B is never taken
// for another product's (B's memory may hold new values at the same address).
std::atomic<uint64_t> product_serial{0};

// B's column piece packed whole for one panel product: its kc × nc blocks by k block then
// n block, each in a slot of one full block's size rounded up to a 64-byte line, as a
// buffer of its own would start.
template <class T>
struct PackedB {
  Eigen::Index n_blocks, k_blocks, slot;
  PackedB(const BlockSizes& s, Eigen::Index cols, Eigen::Index depth)
      : n_blocks((cols + s.nc - 1) / s.nc),
        k_blocks((depth + s.kc - 1) / s.kc),
        slot((s.kc * s.nc + kLine - 1) / kLine * kLine) {}
  Eigen::Index size() const { return k_blocks * n_blocks * slot; }
  static constexpr Eigen::Index kLine = 64 / sizeof(T);
};

// A thread's packing buffers, grown to the largest product it may take part in and kept:
// A's block, and B's column piece packed whole for the panels of that piece the thread
// computes.
template <class T>
struct Workspace {
  std::vector<T, Eigen::aligned_allocator<T>> a, b;
  uint64_t b_product = 0;  // product_serial of the product whose piece b holds; 0: none
  int64_t b_piece = -1;
  Eigen::Index b_kc = 0, b_nc = 0;

  void reserve(int64_t a_size, int64_t b_size) {
    if (static_cast<int64_t>(a.size()) < a_size) a.resize(static_cast<size_t>(a_size));
    if (static_cast<int64_t>(b.size()) < b_size) b.resize(static_cast<size_t>(b_size));
  }
};

// The pool workers' workspaces, by worker_index - 1, at stable addresses. The thread that
// starts a product sizes them for the product's largest task before the workers join it
// (parallel_for's prepare), so what a step allocates does not depend on which thread
// takes which task: the buffers are grown in a product's first run, never later. The mutex
// guards the list, which a worker extends itself when it meets a product inline (inside
// another parallel_for's chunk) before any on the pool.
template <class T>
struct WorkerWorkspaces {
  std::mutex mutex;
  std::deque<Workspace<T>> slots;

  Workspace<T>& slot(int worker) {
    std::lock_guard lock(mutex);
    while (static_cast<int>(slots.size()) < worker) slots.emplace_back();
    return slots[static_cast<size_t>(worker - 1)];
  }
};

template <class T>
WorkerWorkspaces<T>& worker_workspaces() {
  static WorkerWorkspaces<T> w;
  return w;
}

// A thread's own workspace, for any thread but a pool worker. (Only such threads may
// touch it: the C++ runtime allocates when a thread first meets a thread_local with a
// destructor.)
template <class T>
Workspace<T>& own_workspace() {
  thread_local Workspace<T> own;
  return own;
}

// The calling thread's workspace.
template <class T>
Workspace<T>& workspace() {
  thread_local Workspace<T>* worker_slot = nullptr;
  const int worker = worker_index();
  if (worker == 0) return own_workspace<T>();
  if (!worker_slot) worker_slot = &worker_workspaces<T>().slot(worker);
  return *worker_slot;
}

// Element offset of (row, col) in an operand.
template <class T>
int64_t offset(const GemmOperand<T>& x, int64_t row, int64_t col) {
  return x.row_major ? row * x.stride + col : row + col * x.stride;
}

template <class T>
GemmOperand<T> block(const GemmOperand<T>& x, int64_t row, int64_t col, int64_t rows, int64_t cols) {
  return {x.data + offset(x, row, col), rows, cols, x.stride, x.row_major};
}

// c += a·b for one row panel of one column piece, on the calling thread, c column-major,
// as Eigen 3.4's sequential GEMM (general_matrix_matrix_product::run) computes the panel
// alone: the blocking it would choose for the panel's shape, the same packing routines,
// the kernel called on the same blocks in the same order, so the same bits. The one
// difference: Eigen packs B for every panel (its blocks of B span all of the panel's
// columns, and a panel is its whole product), where here the thread packs its piece of
// B once and keeps it for the other panels of the piece it takes in this product
// (`product`, `piece`): B's piece is k × width, packed again for each of the 4 row
// panels of a layer's product otherwise.
template <class T, int OrderA, int OrderB>
void panel_product(const GemmOperand<T>& c, const GemmOperand<const T>& a, const GemmOperand<const T>& b,
                   const BlockSizes& s, uint64_t product, int64_t piece) {
  namespace ei = Eigen::internal;
  using Index = Eigen::Index;
  using Traits = ei::gebp_traits<T, T>;
  using LhsMapper = ei::const_blas_data_mapper<T, Index, OrderA>;
  using RhsMapper = ei::const_blas_data_mapper<T, Index, OrderB>;
  using ResMapper = ei::blas_data_mapper<T, Index, Eigen::ColMajor, Eigen::Unaligned, 1>;
  ei::gemm_pack_lhs<T, Index, LhsMapper, Traits::mr, Traits::LhsProgress, typename Traits::LhsPacket4Packing, OrderA>
      pack_lhs;
  ei::gemm_pack_rhs<T, Index, RhsMapper, Traits::nr, OrderB> pack_rhs;
  ei::gebp_kernel<T, T, Index, ResMapper, Traits::mr, Traits::nr, false, false> kernel;

  const Index rows = c.rows, cols = c.cols, depth = a.cols;
  const LhsMapper lhs(a.data, a.stride);
  const RhsMapper rhs(b.data, b.stride);
  const ResMapper res(c.data, c.stride);
  const PackedB<T> packed(s, cols, depth);
  const Index n_blocks = packed.n_blocks, slot = packed.slot;
  Workspace<T>& w = workspace<T>();
  w.reserve(s.mc * s.kc, packed.size());  // sized already where the pool's workers joined
  if (w.b_product != product || w.b_piece != piece || w.b_kc != s.kc || w.b_nc != s.nc) {
    for (Index k2 = 0, kb = 0; k2 < depth; k2 += s.kc, ++kb) {
      for (Index j2 = 0, jb = 0; j2 < cols; j2 += s.nc, ++jb) {
        pack_rhs(w.b.data() + (kb * n_blocks + jb) * slot, rhs.getSubMapper(k2, j2), std::min(k2 + s.kc, depth) - k2,
                 std::min(j2 + s.nc, cols) - j2);
      }
    }
    w.b_product = product;
    w.b_piece = piece;
    w.b_kc = s.kc;
    w.b_nc = s.nc;
  }
  for (Index i2 = 0; i2 < rows; i2 += s.mc) {
    const Index mc = std::min(i2 + s.mc, rows) - i2;
    for (Index k2 = 0, kb = 0; k2 < depth; k2 += s.kc, ++kb) {
      const Index kc = std::min(k2 + s.kc, depth) - k2;
      pack_lhs(w.a.data(), lhs.getSubMapper(i2, k2), kc, mc);
      for (Index j2 = 0, jb = 0; j2 < cols; j2 += s.nc, ++jb) {
        kernel(res.getSubMapper(i2, j2), w.a.data(), w.b.data() + (kb * n_blocks + jb) * slot, mc, kc,
               std::min(j2 + s.nc, cols) - j2, T(1));
      }
    }
  }
}

template <class T>
void accumulate_product(const GemmOperand<T>& c, const GemmOperand<const T>& a, const GemmOperand<const T>& b,
                        const BlockSizes& blocks, uint64_t product, int64_t piece) {
  if (c.rows == 0 || c.cols == 0 || a.cols == 0) return;
  using Eigen::ColMajor, Eigen::RowMajor;
  if (a.row_major && b.row_major) panel_product<T, RowMajor, RowMajor>(c, a, b, blocks, product, piece);
  if (a.row_major && !b.row_major) panel_product<T, RowMajor, ColMajor>(c, a, b, blocks, product, piece);
  if (!a.row_major && b.row_major) panel_product<T, ColMajor, RowMajor>(c, a, b, blocks, product, piece);
  if (!a.row_major && !b.row_major) panel_product<T, ColMajor, ColMajor>(c, a, b, blocks, product, piece);
}

template <class T>
GemmOperand<T> transposed(const GemmOperand<T>& x) {
  return {x.data, x.cols, x.rows, x.stride, !x.row_major};
}

// Writes the bias into a piece of C (column-major to the kernel; rows [row, row + height)
// and columns [col, col + width) of the whole) or adds it, the bias running down the
// kernel's rows (`by_row`: C was flipped) or along its columns.
template <class T>
void put_bias(const GemmOperand<T>& piece, const T* bias, bool by_row, int64_t row, int64_t col, bool add) {
  for (int64_t j = 0; j < piece.cols; ++j) {
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> column(piece.data + j * piece.stride, piece.rows);
    if (by_row) {
      const Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> values(bias + row, piece.rows);
      if (add) {
        column += values;
      } else {
        column = values;
      }
    } else {
      if (add) {
        column += bias[col + j];
      } else {
        column.setConstant(bias[col + j]);
      }
    }
  }
}

}  // namespace

template <class T>
void gemm_operands(const GemmOperand<T>& c_in, const GemmOperand<const T>& a_in, const GemmOperand<const T>& b_in,
                   bool accumulate, const T* bias, Precision precision) {
  if constexpr (std::is_same_v<T, float>) {
    if (precision != Precision::Float32) return gemm_onednn(c_in, a_in, b_in, accumulate, bias, precision);
  }
  // The kernel writes column-major results; a row-major C is computed as Cᵀ = Bᵀ·Aᵀ.
  const bool flip = c_in.row_major;
  const GemmOperand<T> c = flip ? transposed(c_in) : c_in;
  const GemmOperand<const T> a = flip ? transposed(b_in) : a_in;
  const GemmOperand<const T> b = flip ? transposed(a_in) : b_in;
  const int64_t m = c.rows, n = c.cols, k = a.cols;
  // Row panels fix the bits (a row cut changes them); the column pieces within a panel
  // do not, and follow the thread count.
  const int64_t rows = panel_count(m, n, k);
  const int64_t panel_rows = panel_start(m, rows, 1, 16);
  const int64_t pieces = column_pieces(rows, panel_rows, n, k, threads());
  const uint64_t product = ++product_serial;
  const auto height_of = [&](int64_t r) { return panel_start(m, rows, r + 1, 16) - panel_start(m, rows, r, 16); };
  const auto width_of = [&](int64_t q) {
    return panel_start(n, pieces, q + 1, kColumnGroup) - panel_start(n, pieces, q, kColumnGroup);
  };
  // Where the workers join, every thread that may take a task gets buffers for the
  // largest one. Inline, the calling thread takes every task and grows its buffers in
  // this first run (panel_product).
  const auto prepare = [&](bool workers_join) {
    if (!workers_join || m == 0 || n == 0 || k == 0) return;
    int64_t a_size = 0, b_size = 0;
    // Panels (pieces) differ in size by an alignment step at most: a few distinct ones.
    std::array<int64_t, kMaxPanels> heights{}, widths{};
    const auto distinct = [](std::array<int64_t, kMaxPanels>& out, int64_t count, const auto& size_of) {
      int64_t found = 0;
      for (int64_t i = 0; i < count; ++i) {
        const int64_t size = size_of(i);
        if (std::find(out.begin(), out.begin() + found, size) == out.begin() + found) out[found++] = size;
      }
      return found;
    };
    const int64_t n_heights = distinct(heights, rows, height_of), n_widths = distinct(widths, pieces, width_of);
    for (int64_t i = 0; i < n_heights; ++i) {
      for (int64_t j = 0; j < n_widths; ++j) {
        const BlockSizes blocks = block_sizes<T>(heights[i], widths[j], k);
        a_size = std::max<int64_t>(a_size, blocks.mc * blocks.kc);
        b_size = std::max<int64_t>(b_size, PackedB<T>(blocks, widths[j], k).size());
      }
    }
    workspace<T>().reserve(a_size, b_size);
    for (int worker = 1; worker < threads(); ++worker) worker_workspaces<T>().slot(worker).reserve(a_size, b_size);
  };
  // Piece by piece, so that a thread's next task is most often another panel of the
  // piece of B it has packed.
  parallel_for(rows * pieces, prepare, [&](int64_t task) {
    const int64_t q = task / rows, r = task % rows;
    const int64_t row = panel_start(m, rows, r, 16), height = height_of(r);
    const int64_t col = panel_start(n, pieces, q, kColumnGroup), width = width_of(q);
    const GemmOperand<T> piece = block(c, row, col, height, width);
    // The kernel adds each k block's sum to C: with one block, C = bias + Σ rounds as
    // (0 + Σ) + bias did; with several, the bias goes in after them, as it did before.
    const BlockSizes blocks = block_sizes<T>(height, width, k);
    const bool bias_first = bias && !accumulate && blocks.kc >= k;
    if (bias_first) {
      put_bias(piece, bias, flip, row, col, false);
    } else if (!accumulate) {
      for (int64_t j = 0; j < piece.cols; ++j) std::fill_n(piece.data + j * piece.stride, piece.rows, T(0));
    }
    accumulate_product(piece, block(a, row, 0, height, k), block(b, 0, col, k, width), blocks, product, q);
    if (bias && !bias_first) put_bias(piece, bias, flip, row, col, true);
  });
}

template void gemm_operands<float>(const GemmOperand<float>&, const GemmOperand<const float>&,
                                   const GemmOperand<const float>&, bool, const float*, Precision);
template void gemm_operands<double>(const GemmOperand<double>&, const GemmOperand<const double>&,
                                    const GemmOperand<const double>&, bool, const double*, Precision);

}  // namespace pens
