#include "pens/ops/random.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

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

#if defined(__AVX512F__)
namespace {
// The high and low halves of a * m for 16 lanes of 32 bits: vpmuludq multiplies the even
// lanes (as 64-bit lanes), and the odd ones shifted down; the halves are blended back into
// their lanes. The compiler, left to itself, widened each lane to 64 bits and multiplied
// with vpmullq, at twice the cost.
inline void mulhilo16(__m512i a, __m512i m, __m512i& hi, __m512i& lo) {
  const __m512i even = _mm512_mul_epu32(a, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  constexpr __mmask16 kOdd = 0xAAAA;
  hi = _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(even, 32), odd);
  lo = _mm512_mask_blend_epi32(kOdd, even, _mm512_slli_epi64(odd, 32));
}
}  // namespace
#endif

// The scalar philox4x32 above, one lane per block: 16 blocks to a register with AVX-512;
// elsewhere the loops have no dependence across i, and the compiler runs them on the
// vector registers it has (32x32 -> 64-bit products included).
void NoiseStream::blocks(uint64_t first, uint32_t (&words)[4][kChunk]) const {
  uint32_t c0[kChunk], c1[kChunk], c2[kChunk], c3[kChunk];
  for (int i = 0; i < kChunk; ++i) {
    const uint64_t index = first + static_cast<uint64_t>(i);
    c0[i] = static_cast<uint32_t>(index);
    c1[i] = static_cast<uint32_t>(index >> 32);
    c2[i] = static_cast<uint32_t>(step_);
    c3[i] = static_cast<uint32_t>(step_ >> 32);
  }
#if defined(__AVX512F__)
  // The chunk's four registers of each word go through a round together: a round's
  // products wait on the one before, and four independent chains keep the multipliers busy.
  constexpr int kLanes = 16, kRegisters = kChunk / kLanes;
  const __m512i mul0 = _mm512_set1_epi32(static_cast<int>(kMul0)), mul1 = _mm512_set1_epi32(static_cast<int>(kMul1));
  __m512i x0[kRegisters], x1[kRegisters], x2[kRegisters], x3[kRegisters];
  for (int r = 0; r < kRegisters; ++r) {
    x0[r] = _mm512_loadu_si512(c0 + r * kLanes), x1[r] = _mm512_loadu_si512(c1 + r * kLanes);
    x2[r] = _mm512_loadu_si512(c2 + r * kLanes), x3[r] = _mm512_loadu_si512(c3 + r * kLanes);
  }
  uint32_t k0 = key_[0], k1 = key_[1];
  for (int round = 0; round < 10; ++round) {
    const __m512i key0 = _mm512_set1_epi32(static_cast<int>(k0)), key1 = _mm512_set1_epi32(static_cast<int>(k1));
    for (int r = 0; r < kRegisters; ++r) {
      __m512i hi0, lo0, hi1, lo1;
      mulhilo16(x0[r], mul0, hi0, lo0);
      mulhilo16(x2[r], mul1, hi1, lo1);
      x0[r] = _mm512_ternarylogic_epi32(hi1, x1[r], key0, 0x96);  // three-way xor
      x2[r] = _mm512_ternarylogic_epi32(hi0, x3[r], key1, 0x96);
      x1[r] = lo1;
      x3[r] = lo0;
    }
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  for (int r = 0; r < kRegisters; ++r) {
    _mm512_storeu_si512(words[0] + r * kLanes, x0[r]);
    _mm512_storeu_si512(words[1] + r * kLanes, x1[r]);
    _mm512_storeu_si512(words[2] + r * kLanes, x2[r]);
    _mm512_storeu_si512(words[3] + r * kLanes, x3[r]);
  }
#else
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
#endif
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

#if defined(EIGEN_VECTORIZE_AVX512) && defined(EIGEN_HAS_SINGLE_INSTRUCTION_MADD)
// sin and cos of 16 angles in [0, 2π) at once: Eigen's psincos_float (Eigen 3.4, its FMA
// branch) step for step, so the bits are those of Eigen's psin and pcos, but with the
// range reduction and both polynomials computed once for the two (Eigen computes them
// in each call). Angles of a normal draw are non-negative and far below Eigen's bound for
// its slow path, so both are left out.
void sincos16(Eigen::internal::Packet16f x, Eigen::internal::Packet16f& sin, Eigen::internal::Packet16f& cos) {
  using namespace Eigen::internal;
  using PacketI = Packet16i;
  const Packet16f rounding = pset1<Packet16f>(12582912.0f);  // 1.5 * 2^23: rounds to an integer
  Packet16f y = padd(pmul(x, pset1<Packet16f>(0.636619746685028076171875f)), rounding);  // x 2/π
  EIGEN_OPTIMIZATION_BARRIER(y)
  const PacketI quadrant = preinterpret<PacketI>(y);
  y = psub(y, rounding);
  x = pmadd(y, pset1<Packet16f>(-1.57079601287841796875f), x);
  x = pmadd(y, pset1<Packet16f>(-3.1391647326017846353352069854736328125e-07f), x);
  x = pmadd(y, pset1<Packet16f>(-5.390302529957764765544681040410068817436695098876953125e-15f), x);
  const Packet16f sign_mask = pset1frombits<Packet16f>(0x80000000u);
  const PacketI one = pset1<PacketI>(1);
  const Packet16f sin_sign = pand(preinterpret<Packet16f>(plogical_shift_left<30>(quadrant)), sign_mask);
  const Packet16f cos_sign = pand(preinterpret<Packet16f>(plogical_shift_left<30>(padd(quadrant, one))), sign_mask);
  const Packet16f even = preinterpret<Packet16f>(pcmp_eq(pand(quadrant, one), pzero(quadrant)));
  const Packet16f x2 = pmul(x, x);
  Packet16f c = pset1<Packet16f>(2.4372266125283204019069671630859375e-05f);
  c = pmadd(c, x2, pset1<Packet16f>(-0.00138865201734006404876708984375f));
  c = pmadd(c, x2, pset1<Packet16f>(0.041666619479656219482421875f));
  c = pmadd(c, x2, pset1<Packet16f>(-0.5f));
  c = pmadd(c, x2, pset1<Packet16f>(1.f));
  Packet16f s = pset1<Packet16f>(-0.0001959234114083702898469196984621021329076029360294342041015625f);
  s = pmadd(s, x2, pset1<Packet16f>(0.0083326873655616851693794799871284340042620897293090820312500000f));
  s = pmadd(s, x2, pset1<Packet16f>(-0.1666666203982298255503735617821803316473960876464843750000000000f));
  s = pmul(s, x2);
  s = pmadd(s, x, x);
  sin = pxor(pselect(even, s, c), sin_sign);
  cos = pxor(pselect(even, c, s), cos_sign);
}
#endif

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
      // word_to_unit in T: for float, (m + 0.5) rounded to float and scaled by 2^-24 is
      // the double's value rounded to float (scaling by a power of 2 commutes with it).
      u[i] = (static_cast<T>(w[2 * pair][i] >> 8) + T(0.5)) * T(1.0 / 16777216.0);
      theta[i] = static_cast<T>(kTwoPi * word_to_unit(w[2 * pair + 1][i]));
    }
    r[pair] = (T(-2) * u.log()).sqrt();
#if defined(EIGEN_VECTORIZE_AVX512) && defined(EIGEN_HAS_SINGLE_INSTRUCTION_MADD)
    if constexpr (std::is_same_v<T, float>) {
      using Eigen::internal::Packet16f;
      for (int i = 0; i < NoiseStream::kChunk; i += 16) {
        Packet16f sin, cos;
        sincos16(Eigen::internal::ploadu<Packet16f>(theta.data() + i), sin, cos);
        Eigen::internal::pstoreu(c[pair].data() + i, cos);
        Eigen::internal::pstoreu(s[pair].data() + i, sin);
      }
      c[pair] *= r[pair];
      s[pair] *= r[pair];
      continue;
    }
#endif
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
void NoiseStream::add_normal(const T* x, T* out, int64_t n, T sigma, int64_t first) const {
  for_each_span(first, n, [&](int64_t base, int64_t lo, int64_t hi) {
    T z[kSpan];
    normal_span(*this, base, z);
    // Scaled in a loop of its own: x + sigma * z in one expression may be contracted to a
    // fused multiply-add, one rounding where normal() and an add make two.
    for (int64_t e = lo; e < hi; ++e) z[e - base] *= sigma;
    for (int64_t e = lo; e < hi; ++e) out[e - first] = x[e - first] + z[e - base];
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
template void NoiseStream::add_normal<float>(const float*, float*, int64_t, float, int64_t) const;
template void NoiseStream::add_normal<double>(const double*, double*, int64_t, double, int64_t) const;
template void NoiseStream::normal_at<float>(float*, int64_t, int64_t, float) const;
template void NoiseStream::normal_at<double>(double*, int64_t, int64_t, double) const;

}  // namespace pens
