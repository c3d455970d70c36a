// The threads the kernels share: one pool per process, and parallel_for over it.
//
// Why not OpenMP (which pens used until issue 21): Eigen's OpenMP GEMM splits a product
// into equal static parts and synchronises its threads with busy-wait loops, so one
// thread that the kernel deschedules (a core taken by another process) holds up the
// others while they spin, and two such processes on one machine slow each other down by
// an order of magnitude. Here work is split into more chunks than threads and taken
// from a shared counter (a thread on a busy core simply takes fewer), and a thread that
// has nothing to do sleeps instead of spinning. docs/performance.md has the figures.
//
// Results never depend on the thread count: every chunk computes the same elements in
// the same order whichever thread runs it.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

namespace pens {

// The CPUs this process may run on (its affinity mask, so a `taskset` or a container's
// CPU set is respected), at least 1.
int usable_cpus();

// Sets the threads of the kernels: n >= 1, or 0 for usable_cpus(). Starts or stops pool
// threads as needed; call it between steps, not inside parallel_for.
void set_threads(int n);
// The current thread count (1 until set_threads is called).
int threads();
// The count set_threads(n) would give.
int resolve_threads(int n);
// "1 thread", "2 threads": resolve_threads(n) in words, for progress lines.
std::string threads_text(int n);

// Which of the pool's threads runs the caller: 1 .. threads() - 1 on a pool worker, 0 on
// any other thread (among them the one that calls parallel_for).
int worker_index();

namespace detail {
using ChunkFn = void (*)(const void* body, int64_t chunk);
using PrepareFn = void (*)(const void* prepare, bool workers_join);
void run_chunks(int64_t chunks, ChunkFn fn, const void* body, PrepareFn prepare = nullptr,
                const void* prepare_arg = nullptr);
}  // namespace detail

// Runs body(chunk) for every chunk in [0, chunks), on the pool's threads and the calling
// one; returns when all have run. Chunks must be independent. Nothing is allocated, so
// steps that must not allocate may call it. A nested call runs on the calling thread.
template <class Body>
void parallel_for(int64_t chunks, const Body& body) {
  static_assert(std::is_invocable_v<const Body&, int64_t>);
  detail::run_chunks(
      chunks, [](const void* b, int64_t chunk) { (*static_cast<const Body*>(b))(chunk); }, &body);
}

// parallel_for, with prepare(workers_join) called once on the calling thread before any
// chunk runs. workers_join: the pool's workers will run chunks of this call; they are
// idle while prepare runs (inside no chunk of this call or any other), so prepare may set
// up per-worker state they will use, by worker_index. Where the chunks run inline
// (workers_join false) the workers may be busy with another thread's call: prepare must
// then touch the calling thread's state only. State sized here, for every thread that may
// take a chunk, does not depend on which thread takes which (gemm's packing buffers).
template <class Prepare, class Body>
void parallel_for(int64_t chunks, const Prepare& prepare, const Body& body) {
  static_assert(std::is_invocable_v<const Prepare&, bool>);
  static_assert(std::is_invocable_v<const Body&, int64_t>);
  detail::run_chunks(
      chunks, [](const void* b, int64_t chunk) { (*static_cast<const Body*>(b))(chunk); }, &body,
      [](const void* p, bool workers_join) { (*static_cast<const Prepare*>(p))(workers_join); }, &prepare);
}

namespace detail {
// body(begin, count) over [0, extent) in consecutive blocks of `per`, the last one
// shorter, on the pool; one call on the calling thread when one block covers it.
template <class Body>
void parallel_blocks(int64_t extent, int64_t per, const Body& body) {
  static_assert(std::is_invocable_v<const Body&, int64_t, int64_t>);
  if (extent <= 0) return;
  if (per >= extent) {
    body(int64_t{0}, extent);
    return;
  }
  parallel_for((extent + per - 1) / per, [&](int64_t block) {
    const int64_t begin = block * per;
    body(begin, extent - begin < per ? extent - begin : per);
  });
}
}  // namespace detail

// Elementwise work over elements [0, n): body(begin, count) for consecutive ranges of
// kElementwiseRange elements, on the pool (ranges fixed by n alone, so each element is
// computed the same on any thread count); one call on the calling thread when n fits one
// range, where the pool's round trip would cost more than it saves.
inline constexpr int64_t kElementwiseRange = 16384;
template <class Body>
void parallel_ranges(int64_t n, const Body& body) {
  detail::parallel_blocks(n, kElementwiseRange, body);
}

// Work over a row-major [rows, cols] matrix in blocks of whole rows, body(row_begin,
// row_count), each about kElementwiseRange elements: row-wise work, each row computed by
// one call. The blocks depend on the shape alone; one call on the calling thread when the
// matrix fits one range.
template <class Body>
void parallel_rows(int64_t rows, int64_t cols, const Body& body) {
  detail::parallel_blocks(rows, cols > 0 && cols < kElementwiseRange ? kElementwiseRange / cols : 1, body);
}

// The same in blocks of whole columns, body(col_begin, col_count), a multiple of 16 wide
// but the last: sums down the rows, per column. Each column is summed by one call, in
// whatever order it chooses (rows ascending, in pens' kernels), so the sums have the
// same bits on any thread count.
template <class Body>
void parallel_columns(int64_t rows, int64_t cols, const Body& body) {
  const int64_t wanted = rows > 0 ? kElementwiseRange / rows : cols;
  detail::parallel_blocks(cols, wanted < 16 ? 16 : (wanted + 15) / 16 * 16, body);
}

}  // namespace pens
