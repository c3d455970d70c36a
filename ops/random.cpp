#include "ops/random.h"

#include <cmath>
#include <numbers>

namespace pens {

namespace {
constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;

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

NoiseStream::NoiseStream(NoiseKey key, uint64_t stream) : step_(key.step) {
  uint64_t k = mix64(key.seed ^ mix64(stream));
  key_ = {static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)};
}

Block NoiseStream::block(uint64_t i) const {
  return philox4x32({static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32),
                     static_cast<uint32_t>(step_), static_cast<uint32_t>(step_ >> 32)},
                    key_);
}

template <class T>
void NoiseStream::bernoulli(T* out, int64_t n, double keep, T scale) const {
  // keep * 2^32 as a 64-bit threshold: keep = 1 keeps every element, keep = 0 none.
  const uint64_t threshold = static_cast<uint64_t>(std::ldexp(keep, 32));
  for (int64_t base = 0; base < n; base += 4) {
    const Block b = block(static_cast<uint64_t>(base) / 4);
    const int64_t m = std::min<int64_t>(4, n - base);
    for (int64_t j = 0; j < m; ++j) out[base + j] = b[static_cast<size_t>(j)] < threshold ? scale : T(0);
  }
}

template <class T>
void NoiseStream::normal(T* out, int64_t n, T sigma) const {
  constexpr double kTwoPi = 2.0 * std::numbers::pi;
  for (int64_t base = 0; base < n; base += 4) {
    const Block b = block(static_cast<uint64_t>(base) / 4);
    T z[4];
    for (int pair = 0; pair < 2; ++pair) {
      const T r = std::sqrt(T(-2) * std::log(static_cast<T>(word_to_unit(b[2 * pair]))));
      const T theta = static_cast<T>(kTwoPi * word_to_unit(b[2 * pair + 1]));
      z[2 * pair] = r * std::cos(theta);
      z[2 * pair + 1] = r * std::sin(theta);
    }
    const int64_t m = std::min<int64_t>(4, n - base);
    for (int64_t j = 0; j < m; ++j) out[base + j] = sigma * z[j];
  }
}

double NoiseStream::uniform(uint64_t i) const {
  return word_to_unit(block(i / 4)[i % 4]);
}

template void NoiseStream::bernoulli<float>(float*, int64_t, double, float) const;
template void NoiseStream::bernoulli<double>(double*, int64_t, double, double) const;
template void NoiseStream::normal<float>(float*, int64_t, float) const;
template void NoiseStream::normal<double>(double*, int64_t, double) const;

}  // namespace pens
