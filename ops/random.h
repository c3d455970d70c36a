// Counter-based random numbers: every draw is a pure function of (key, counter), so
// any noise tensor can be regenerated exactly from its key. Philox4x32-10 (Salmon et
// al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011) maps a 128-bit counter
// and a 64-bit key to 128 random bits.
//
// pens keys each stochastic node by (seed, stream), where the stream is fixed per node
// (and per child in a pseudo-ensemble), and counts by (element index, step). Replaying
// a step with the same NoiseKey reproduces every mask and every Gaussian draw bit for
// bit, which is what makes stochastic ops gradient-checkable.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace pens {

using Block = std::array<uint32_t, 4>;

Block philox4x32(Block counter, std::array<uint32_t, 2> key);

// splitmix64's finalizer: a bijective 64-bit mixer.
uint64_t mix64(uint64_t x);
// FNV-1a, for deriving a default stream from a node name.
uint64_t hash_name(std::string_view name);

// The per-step random state a tape runs with.
struct NoiseKey {
  uint64_t seed = 0;
  uint64_t step = 0;
};

class NoiseStream {
 public:
  NoiseStream() = default;
  NoiseStream(NoiseKey key, uint64_t stream);

  // The four 32-bit words of block `i` (elements 4i .. 4i+3 of a draw).
  Block block(uint64_t i) const;

  // Blocks first .. first + kChunk - 1 at once, word j of block first + i in words[j][i]:
  // the same bits as block(), laid out so that the rounds run across SIMD lanes.
  static constexpr int kChunk = 64;
  void blocks(uint64_t first, uint32_t (&words)[4][kChunk]) const;

  // out[i] = scale where the i-th uniform word falls under keep, else 0.
  template <class T>
  void bernoulli(T* out, int64_t n, double keep, T scale) const;
  // out[i] = sigma * N(0, 1), Box-Muller on pairs of words.
  template <class T>
  void normal(T* out, int64_t n, T sigma) const;
  // A uniform double in (0, 1) from element i.
  double uniform(uint64_t i) const;

 private:
  std::array<uint32_t, 2> key_{};
  uint64_t step_ = 0;
};

// A uniform value in (0, 1) from a 32-bit word: 24 bits, centred in its bucket, so the
// float and double tapes see the same numbers and log() never sees 0.
inline double word_to_unit(uint32_t w) { return ((w >> 8) + 0.5) * (1.0 / 16777216.0); }

}  // namespace pens
