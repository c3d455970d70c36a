// Products on oneDNN's matmul (ops/precision.h): c = a·b (+ c) (+ bias), in bfloat16 (both
// operands rounded to bfloat16, float32 sums and a float32 result) or in float32 on
// oneDNN's own float kernel.
//
// A bfloat16 product converts its operands once, on the pool's threads, into bfloat16
// copies laid out as the operands are (row- or column-major, dense); a float32 one reads
// them where they are. Either then cuts C into pieces that
// depend on its shape alone (blocks of kPieceRows rows where C has more rows than
// columns, else of kPieceCols columns) and runs each piece on one of the pool's threads
// as one single-threaded oneDNN matmul. A piece's result depends on its shape and data
// only, so the bits do not depend on the thread count. Primitives are made the first time
// a thread meets a piece's shape and kept (per thread, with their memory objects): a
// step's products create none after its first run. oneDNN runs on OpenMP in Debian's
// build; each thread that calls it sets its own OpenMP thread count to 1 once, so the
// pool, not OpenMP, shares out the work (ops/parallel.h says why).
#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <string>

#include "pens/ops/gemm.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/ir/memory.h"
#include "pens/ops/parallel.h"
#include "pens/ops/precision.h"

#if defined(PENS_HAVE_DNNL)
#include <immintrin.h>
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>
#endif

namespace pens {

namespace {
std::atomic<int64_t> primitives_made{0};
}  // namespace

int64_t onednn_primitives_made() { return primitives_made.load(); }

#if defined(PENS_HAVE_DNNL)

namespace {

// 128 rather than 256 or 64: the step of bench/modes ran 1.0-1.7x faster on 2 threads than
// with 256 (pieces shared out more evenly) and up to 1.3x faster than with 64 (fewer,
// larger oneDNN calls), and as fast on 1 thread (2026-11-30, this AMD Zen 4).
constexpr int64_t kPieceRows = 128;
constexpr int64_t kPieceCols = 128;
// Elements converted per task.
constexpr int64_t kConvertChunk = 1 << 16;

using Bf16 = Eigen::bfloat16;

// A thread's bfloat16 copy of one operand, kept from product to product and charged
// against pens' memory limit (ops/ir/memory.h) whenever it grows.
struct Copy {
  std::vector<Bf16> values;
  MemoryCharge charge;

  Bf16* sized(int64_t n) {
    if (static_cast<size_t>(n) > values.capacity()) {
      charge = MemoryCharge();  // the old buffer's charge goes with it
      charge = MemoryCharge(bytes_of(static_cast<uint64_t>(n), sizeof(Bf16), "a bfloat16 operand"),
                            "a thread's bfloat16 copy of a product's operand");
      values.reserve(static_cast<size_t>(n));
    }
    values.resize(static_cast<size_t>(n));
    return values.data();
  }
};

// Elements 0 .. n - 1 of `from` rounded to bfloat16 (to nearest, ties to even). With
// AVX512-BF16, its conversion instruction, 16 at a time (masked for the last ones, so
// every element is converted alike): it flushes float denormals (below 1.2e-38) to zero,
// which Eigen's cast, used elsewhere, keeps; Eigen's cast was a dozen integer operations
// per vector here, and the conversions 10 % of a bfloat16 step.
void round_to_bfloat16(const float* from, Bf16* to, int64_t n) {
#if defined(__AVX512BF16__)
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 live = n - i >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m256bh rounded = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(live, from + i));
    _mm256_mask_storeu_epi16(to + i, live, reinterpret_cast<const __m256i&>(rounded));
  }
#else
  Eigen::Map<Eigen::Array<Bf16, Eigen::Dynamic, 1>>(to, n) = Eigen::Map<const Eigen::ArrayXf>(from, n).cast<Bf16>();
#endif
}

// x as a dense bfloat16 matrix of the same order (leading dimension: its columns when
// row-major, its rows otherwise), into `out`, on the pool's threads.
void convert(const GemmOperand<const float>& x, Copy& out) {
  const int64_t lines = x.row_major ? x.rows : x.cols, width = x.row_major ? x.cols : x.rows;
  const int64_t per_task = std::max<int64_t>(1, kConvertChunk / std::max<int64_t>(width, 1));
  Bf16* dst = out.sized(lines * width);
  parallel_for((lines + per_task - 1) / per_task, [&](int64_t task) {
    for (int64_t line = task * per_task; line < std::min(lines, (task + 1) * per_task); ++line) {
      round_to_bfloat16(x.data + line * x.stride, dst + line * width, width);
    }
  });
}

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::memory::desc matrix_desc(int64_t rows, int64_t cols, int64_t stride, bool row_major, dnnl::memory::data_type t) {
  return {{rows, cols}, t, row_major ? dnnl::memory::dims{stride, 1} : dnnl::memory::dims{1, stride}};
}

// What a piece's primitive depends on.
struct PieceKey {
  int64_t m, k, n, lda, ldb, ldc;
  bool a_row, b_row, c_row, accumulate, bias, bf16;
  bool operator==(const PieceKey&) const = default;
};

struct PieceKeyHash {
  size_t operator()(const PieceKey& key) const {
    size_t h = 0;
    for (const int64_t v : {key.m, key.k, key.n, key.lda, key.ldb, key.ldc}) h = h * 1000003u ^ static_cast<size_t>(v);
    return h * 31u +
           (key.a_row | key.b_row << 1 | key.c_row << 2 | key.accumulate << 3 | key.bias << 4 | key.bf16 << 5);
  }
};

// A piece's primitive and its arguments, whose memory objects are pointed at each
// product's data before it runs.
struct Piece {
  dnnl::matmul matmul;
  dnnl::memory a, b, c, bias;
  std::unordered_map<int, dnnl::memory> args;
};

// The calling thread's oneDNN state: its stream and its pieces' primitives.
struct ThreadState {
  dnnl::stream stream{cpu_engine()};
  std::unordered_map<PieceKey, Piece, PieceKeyHash> pieces;
  ThreadState() { omp_set_num_threads(1); }
};

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

Piece& piece_for(ThreadState& state, const PieceKey& key) {
  if (auto found = state.pieces.find(key); found != state.pieces.end()) return found->second;
  using dt = dnnl::memory::data_type;
  const dt operands = key.bf16 ? dt::bf16 : dt::f32;
  const auto a = matrix_desc(key.m, key.k, key.lda, key.a_row, operands);
  const auto b = matrix_desc(key.k, key.n, key.ldb, key.b_row, operands);
  const auto c = matrix_desc(key.m, key.n, key.ldc, key.c_row, dt::f32);
  const dnnl::memory::desc bias({1, key.n}, dt::f32, dnnl::memory::format_tag::ab);
  dnnl::primitive_attr attr;
  if (key.accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  auto& engine = cpu_engine();
  const auto desc = key.bias ? dnnl::matmul::desc(a, b, bias, c) : dnnl::matmul::desc(a, b, c);
  const dnnl::matmul::primitive_desc pd(desc, attr, engine);
  primitives_made.fetch_add(1);
  Piece piece{dnnl::matmul(pd), dnnl::memory(a, engine, DNNL_MEMORY_NONE), dnnl::memory(b, engine, DNNL_MEMORY_NONE),
              dnnl::memory(c, engine, DNNL_MEMORY_NONE), dnnl::memory(bias, engine, DNNL_MEMORY_NONE), {}};
  piece.args = {{DNNL_ARG_SRC, piece.a}, {DNNL_ARG_WEIGHTS, piece.b}, {DNNL_ARG_DST, piece.c}};
  if (key.bias) piece.args.emplace(DNNL_ARG_BIAS, piece.bias);
  return state.pieces.emplace(key, std::move(piece)).first->second;
}

// The calling thread's bfloat16 copies of a product's operands.
struct Copies {
  Copy a, b;
};

Copies& copies() {
  thread_local Copies c;
  return c;
}

}  // namespace

std::string onednn_unavailable() { return ""; }

std::string bfloat16_unavailable() {
  static const std::string why = [] {
    const auto isa = dnnl::get_effective_cpu_isa();
    using cpu_isa = dnnl::cpu_isa;
    if (isa == cpu_isa::avx512_core_bf16 || isa == cpu_isa::avx512_core_amx) return std::string();
    return std::string("this CPU has neither AVX512-BF16 nor AMX, the instructions oneDNN's bfloat16 matmul needs");
  }();
  return why;
}

void gemm_onednn(const GemmOperand<float>& c, const GemmOperand<const float>& a, const GemmOperand<const float>& b,
                 bool accumulate, const float* bias, Precision precision) {
  const int64_t m = c.rows, n = c.cols, k = a.cols;
  if (m == 0 || n == 0) return;
  if (k == 0) {  // no sums: C keeps its values (accumulate) or becomes the bias, or zero
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        float& x = c.data[c.row_major ? i * c.stride + j : i + j * c.stride];
        x = (accumulate ? x : 0.0f) + (bias ? bias[j] : 0.0f);
      }
    }
    return;
  }
  // The operands' data and leading dimensions as the pieces read them: the bfloat16
  // copies, dense, or the float operands where they are.
  const bool bf16 = precision == Precision::BFloat16;
  const void* a_data = a.data;
  const void* b_data = b.data;
  int64_t lda = a.stride, ldb = b.stride;
  size_t element = sizeof(float);
  if (bf16) {
    Copies& mine = copies();
    convert(a, mine.a);
    convert(b, mine.b);
    a_data = mine.a.values.data(), b_data = mine.b.values.data();
    lda = a.row_major ? k : m, ldb = b.row_major ? n : k;
    element = sizeof(Bf16);
  }
  const auto at = [&](const void* base, int64_t offset) {
    return const_cast<char*>(static_cast<const char*>(base) + offset * static_cast<int64_t>(element));
  };
  const bool by_rows = m > n;
  const int64_t span = by_rows ? kPieceRows : kPieceCols, extent = by_rows ? m : n;
  parallel_for((extent + span - 1) / span, [&](int64_t p) {
    const int64_t first = p * span, size = std::min(span, extent - first);
    const int64_t rows = by_rows ? size : m, cols = by_rows ? n : size;
    const int64_t row = by_rows ? first : 0, col = by_rows ? 0 : first;
    ThreadState& state = thread_state();
    Piece& piece = piece_for(state, {rows, k, cols, lda, ldb, c.stride, a.row_major, b.row_major, c.row_major,
                                     accumulate, bias != nullptr, bf16});
    piece.a.set_data_handle(at(a_data, a.row_major ? row * lda : row));
    piece.b.set_data_handle(at(b_data, b.row_major ? col : col * ldb));
    piece.c.set_data_handle(c.data + (c.row_major ? row * c.stride + col : row + col * c.stride));
    if (bias) piece.bias.set_data_handle(const_cast<float*>(bias + col));
    piece.matmul.execute(state.stream, piece.args);
    state.stream.wait();
  });
}

#else

std::string onednn_unavailable() {
  return "this pens was built without oneDNN (Debian: libdnnl-dev, then meson setup --reconfigure -Ddnnl=enabled)";
}

std::string bfloat16_unavailable() { return onednn_unavailable(); }

void gemm_onednn(const GemmOperand<float>&, const GemmOperand<const float>&, const GemmOperand<const float>&, bool,
                 const float*, Precision precision) {
  fail("a product in precision ", precision_name(precision), ": ", onednn_unavailable());
}

#endif

}  // namespace pens
