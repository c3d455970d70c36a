#include "pens/ops/random.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "pens/ops/parallel.h"

namespace pens {

namespace {
constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;
// Elements per chunk of NoiseStream::blocks().
constexpr int64_t kSpan = 4 * NoiseStream::kChunk;
// Runs body(base, lo, hi) for the spans of a draw that elements first .. first + n - 1
// fall in: base = a multiple of kSpan, lo .. hi - 1 the elements of the range within
// [base, base + kSpan). Spans depend only on their counters, so the result does not
// depend on the thread count, and a range of a draw equals those elements of the whole
// draw. Below kParallelElements a draw stays on the calling thread; above it, the pool
// (ops/parallel.h) takes kParallelElements at a time.
constexpr int64_t kParallelElements = 16384;

template <class Body>
void for_each_span(int64_t first, int64_t n, const Body& body) {
  const int64_t start = first - first % kSpan, end = first + n;
  const int64_t spans = (end - start + kSpan - 1) / kSpan;
  constexpr int64_t kPerTask = kParallelElements / kSpan;
  parallel_for((spans + kPerTask - 1) / kPerTask, [&](int64_t task) {
    for (int64_t k = task * kPerTask; k < std::min(spans, (task + 1) * kPerTask); ++k) {
      const int64_t base = start + k * kSpan;
      body(base, std::max(base, first), std::min(base + kSpan, end));
    }
  });
}

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}
}  // namespace

Block philox4x32(Block c, std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, c[0], hi0, lo0);
    mulhilo(kMul1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t hash_name(std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 0x100000001B3ull;
  }
  return h;
}

uint64_t fold_in(uint64_t key, uint64_t data) { return mix64(key ^ mix64(data)); }

NoiseStream::NoiseStream(NoiseKey key, uint64_t site, std::span<const RowRun> rows) : step_(key.step), rows_(rows) {
  constexpr uint64_t kExample = 0x6578616D706C6521ull;
  uint64_t k = fold_in(key.seed, site);
  if (key.example != 0) k = fold_in(k, key.example ^ kExample);
  key_ = {static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)};
}

Block NoiseStream::block(uint64_t i) const {
  return philox4x32({static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32),
                     static_cast<uint32_t>(step_), static_cast<uint32_t>(step_ >> 32)},
                    key_);
}

// The scalar philox4x32 above, one lane per block: the loops have no dependence across
// i, so the compiler runs them on vector registers (32x32 -> 64-bit products included).
void NoiseStream::blocks(uint64_t first, uint32_t (&words)[4][kChunk]) const {
  uint32_t c0[kChunk], c1[kChunk], c2[kChunk], c3[kChunk];
  for (int i = 0; i < kChunk; ++i) {
    const uint64_t index = first + static_cast<uint64_t>(i);
    c0[i] = static_cast<uint32_t>(index);
    c1[i] = static_cast<uint32_t>(index >> 32);
    c2[i] = static_cast<uint32_t>(step_);
    c3[i] = static_cast<uint32_t>(step_ >> 32);
  }
  uint32_t k0 = key_[0], k1 = key_[1];
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < kChunk; ++i) {
      const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0[i];
      const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2[i];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[i] ^ k0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[i] ^ k1;
      c1[i] = static_cast<uint32_t>(p1);
      c3[i] = static_cast<uint32_t>(p0);
      c0[i] = n0;
      c2[i] = n2;
    }
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  for (int i = 0; i < kChunk; ++i) {
    words[0][i] = c0[i];
    words[1][i] = c1[i];
    words[2][i] = c2[i];
    words[3][i] = c3[i];
  }
}

template <class T>
void NoiseStream::bernoulli(T* out, int64_t n, double keep, T scale, int64_t first) const {
  // keep * 2^32 as a 64-bit threshold: keep = 1 keeps every element, keep = 0 none.
  const uint64_t threshold = static_cast<uint64_t>(std::ldexp(keep, 32));
  if (threshold > std::numeric_limits<uint32_t>::max()) {  // every word is under it
    std::fill_n(out, n, scale);
    return;
  }
  const auto below = static_cast<uint32_t>(threshold);
  for_each_span(first, n, [&](int64_t base, int64_t lo, int64_t hi) {
    uint32_t w[4][kChunk];
    blocks(static_cast<uint64_t>(base) / 4, w);
    T* o = out + (base - first);
    if (lo == base && hi == base + kSpan) {
      // Word by word (the compares run on vector registers), then interleaved into the
      // draw's order: element 4i + j is word j of block i. Written as one loop over
      // elements with a select inside, it ran as a scalar branch per element.
      alignas(64) T m[4][kChunk];
      const T kept = scale;
      for (int j = 0; j < 4; ++j) {
        for (int i = 0; i < kChunk; ++i) m[j][i] = static_cast<T>(w[j][i] < below) * kept;
      }
      for (int i = 0; i < kChunk; ++i) {
        for (int j = 0; j < 4; ++j) o[4 * i + j] = m[j][i];
      }
    } else {
      for (int64_t e = lo - base; e < hi - base; ++e) o[e] = w[e % 4][e / 4] < below ? scale : T(0);
    }
  });
}

namespace {

// Elements base .. base + kSpan - 1 of a stream's standard normal draw (base a multiple
// of kSpan): Box-Muller on each pair of words, a chunk at a time, with Eigen's vectorized
// log, sin and cos (within a few ulp of the C library's scalar ones). Element e depends
// on block e / 4 alone, so any range of the draw can be made on its own.
template <class T>
void normal_span(const NoiseStream& stream, int64_t base, T (&z)[kSpan]) {
  using Lanes = Eigen::Array<T, NoiseStream::kChunk, 1>;
  constexpr double kTwoPi = 2.0 * std::numbers::pi;
  uint32_t w[4][NoiseStream::kChunk];
  Lanes u, theta, r[2], c[2], s[2];
  stream.blocks(static_cast<uint64_t>(base) / 4, w);
  for (int pair = 0; pair < 2; ++pair) {
    for (int i = 0; i < NoiseStream::kChunk; ++i) {
      u[i] = static_cast<T>(word_to_unit(w[2 * pair][i]));
      theta[i] = static_cast<T>(kTwoPi * word_to_unit(w[2 * pair + 1][i]));
    }
    r[pair] = (T(-2) * u.log()).sqrt();
    c[pair] = r[pair] * theta.cos();
    s[pair] = r[pair] * theta.sin();
  }
  for (int i = 0; i < NoiseStream::kChunk; ++i) {
    z[4 * i] = c[0][i];
    z[4 * i + 1] = s[0][i];
    z[4 * i + 2] = c[1][i];
    z[4 * i + 3] = s[1][i];
  }
}

}  // namespace

template <class T>
void NoiseStream::normal(T* out, int64_t n, T sigma, int64_t first) const {
  for_each_span(first, n, [&](int64_t base, int64_t lo, int64_t hi) {
    T z[kSpan];
    normal_span(*this, base, z);
    for (int64_t e = lo; e < hi; ++e) out[e - first] = sigma * z[e - base];
  });
}

template <class T>
void NoiseStream::normal_at(T* out, int64_t first, int64_t n, T sigma) const {
  T z[kSpan];
  int64_t made = -1;  // the base of the span in z
  for (int64_t e = first; e < first + n; ++e) {
    const int64_t base = e - e % kSpan;
    if (base != made) {
      normal_span(*this, base, z);
      made = base;
    }
    out[e - first] = sigma * z[e - base];
  }
}

double NoiseStream::uniform(uint64_t i) const {
  return word_to_unit(block(i / 4)[i % 4]);
}

template void NoiseStream::bernoulli<float>(float*, int64_t, double, float, int64_t) const;
template void NoiseStream::bernoulli<double>(double*, int64_t, double, double, int64_t) const;
template void NoiseStream::normal<float>(float*, int64_t, float, int64_t) const;
template void NoiseStream::normal<double>(double*, int64_t, double, int64_t) const;
template void NoiseStream::normal_at<float>(float*, int64_t, int64_t, float) const;
template void NoiseStream::normal_at<double>(double*, int64_t, int64_t, double) const;

}  // namespace pens
