// Counter-based random numbers: every draw is a pure function of (key, counter), so
// any noise tensor can be regenerated exactly from its key. Philox4x32-10 (Salmon et
// al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011) maps a 128-bit counter
// and a 64-bit key to 128 random bits.
//
// A draw is keyed by its site (the stochastic node, in its child: the op's `stream`
// attribute) and by the NoiseKey of the forward pass that makes it: the run's seed, the
// step and which graph of the step draws (one batch, or one of many sentence trees).
// Seed, site and graph are folded into Philox's 64-bit key, one after the other (as JAX's
// fold_in does); the counter holds the element block and the step. Replaying a key
// reproduces every mask and every Gaussian draw bit for bit, which is what makes
// stochastic ops gradient-checkable and resumed runs exact.
//
// The process of a data-parallel run is not part of the key: a process computing rows
// of a global batch draws, through its RowRuns, what those rows draw in a one-process
// run, so the noise does not depend on how many processes share the batch.
//
// The graph is folded in only when it is not 0, so a key {seed, step} draws what it drew
// before keys had it: parameter initialization, data order and the synthetic tasks,
// which use the generator too, did not change.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace pens {

using Block = std::array<uint32_t, 4>;

Block philox4x32(Block counter, std::array<uint32_t, 2> key);

// splitmix64's finalizer: a bijective 64-bit mixer.
uint64_t mix64(uint64_t x);
// FNV-1a, for deriving a default stream from a node name.
uint64_t hash_name(std::string_view name);

// What a forward pass's draws depend on, besides their site.
struct NoiseKey {
  uint64_t seed = 0;     // the run's
  uint64_t step = 0;     // the training step (or evaluation batch)
  uint64_t example = 0;  // which graph of the step: a tree's index; 0 for a step's one batch
};

// Where rows of a tape's batch sit in the batch whose noise they draw: rows
// [local, local + count) are rows [global, global + count) of the global batch. A process
// of a data-parallel run computes a shard of each global batch (its labeled rows and its
// unlabeled rows: two runs) and draws for it what the one-process run draws there.
struct RowRun {
  int64_t local = 0, global = 0, count = 0;
};

// JAX's fold_in: a key derived from a key and an integer, a bijection of each for the
// other fixed, so keys for different data differ.
uint64_t fold_in(uint64_t key, uint64_t data);

class NoiseStream {
 public:
  NoiseStream() = default;
  // `site` identifies the stochastic node (and child) within its graph. `rows`, when not
  // empty, places the batch's rows in a global batch (for a draw over batch rows; it must
  // outlive the stream).
  NoiseStream(NoiseKey key, uint64_t site, std::span<const RowRun> rows = {});

  // Calls f(row, global_row, n) for each stretch of rows first .. first + count - 1 of the
  // batch that lies contiguously in the global batch, `row` counted from `first`: what a
  // row-wise draw makes one draw each. Without a placement, one call f(0, first, count).
  template <class F>
  void for_rows(int64_t first, int64_t count, F&& f) const {
    if (rows_.empty()) {
      f(int64_t{0}, first, count);
      return;
    }
    for (const RowRun& r : rows_) {
      const int64_t lo = std::max(first, r.local), hi = std::min(first + count, r.local + r.count);
      if (lo < hi) f(lo - first, r.global + (lo - r.local), hi - lo);
    }
  }

  // The four 32-bit words of block `i` (elements 4i .. 4i+3 of a draw).
  Block block(uint64_t i) const;

  // Blocks first .. first + kChunk - 1 at once, word j of block first + i in words[j][i]:
  // the same bits as block(), laid out so that the rounds run across SIMD lanes.
  static constexpr int kChunk = 64;
  void blocks(uint64_t first, uint32_t (&words)[4][kChunk]) const;

  // out[i] = scale where uniform word first + i falls under keep, else 0: elements
  // first .. first + n - 1 of the draw, equal to those of a draw from 0.
  template <class T>
  void bernoulli(T* out, int64_t n, double keep, T scale, int64_t first = 0) const;
  // out[i] = sigma * N(0, 1) of element first + i, Box-Muller on pairs of words.
  template <class T>
  void normal(T* out, int64_t n, T sigma, int64_t first = 0) const;
  // out[i] = x[i] + sigma * N(0, 1) of element first + i: the same draw added to x in the
  // pass that makes it (out may be x).
  template <class T>
  void add_normal(const T* x, T* out, int64_t n, T sigma, int64_t first = 0) const;
  // The same as normal(out, n, sigma, first), on the calling thread (for the many small
  // draws of lookup noise).
  template <class T>
  void normal_at(T* out, int64_t first, int64_t n, T sigma) const;
  // A uniform double in (0, 1) from element i.
  double uniform(uint64_t i) const;

 private:
  std::array<uint32_t, 2> key_{};
  uint64_t step_ = 0;
  std::span<const RowRun> rows_;
};

// A uniform value in (0, 1) from a 32-bit word: 24 bits, centred in its bucket, so the
// float and double tapes see the same numbers and log() never sees 0.
inline double word_to_unit(uint32_t w) { return ((w >> 8) + 0.5) * (1.0 / 16777216.0); }

}  // namespace pens
