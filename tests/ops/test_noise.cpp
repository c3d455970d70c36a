// The counter-based generator and the noise ops: exact replay from a key, and the
// statistics the noise processes promise.
#include <doctest/doctest.h>

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <vector>

#include "pens/ops/parallel.h"
#include "pens/ops/random.h"
#include "tests/support/eval.h"

namespace test_noise {

using namespace pens;
using pens::testing::evaluate;

TEST_CASE("philox4x32-10 reproduces the Random123 known-answer vectors") {
  CHECK(philox4x32({0, 0, 0, 0}, {0, 0}) == Block{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
        Block{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
        Block{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("a noise stream is a pure function of key, stream and counter") {
  const NoiseStream a(NoiseKey{1, 5}, 42);
  const NoiseStream again(NoiseKey{1, 5}, 42);
  CHECK(a.block(3) == again.block(3));
  CHECK(a.block(3) != a.block(4));
  CHECK(a.block(3) != NoiseStream(NoiseKey{1, 6}, 42).block(3));  // next step
  CHECK(a.block(3) != NoiseStream(NoiseKey{2, 5}, 42).block(3));  // other seed
  CHECK(a.block(3) != NoiseStream(NoiseKey{1, 5}, 43).block(3));  // other node or child
  CHECK(a.block(3) != NoiseStream(NoiseKey{1, 5, 1}, 42).block(3));  // other graph of the step
  CHECK(NoiseStream(NoiseKey{1, 5, 2}, 42).block(3) == NoiseStream(NoiseKey{1, 5, 2}, 42).block(3));
  // Without a graph, the key is Philox's key fold_in(seed, site) and the counter (block,
  // step): what keys drew before they had a graph.
  const uint64_t k = fold_in(1, 42);
  CHECK(a.block(3) == philox4x32({3, 0, 5, 0}, {static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)}));
  // Float and double draws come from the same words.
  float f[7];
  double d[7];
  a.normal(f, 7, 1.0f);
  a.normal(d, 7, 1.0);
  for (int i = 0; i < 7; ++i) CHECK(f[i] == doctest::Approx(d[i]).epsilon(1e-5));
}

// Masks are compared bit for bit; Gaussian draws within a few float ulp, since the
// chunked Box-Muller uses Eigen's vectorized log, sin and cos, not the C library's.
TEST_CASE("chunked draws are the per-block draws, tails included") {
  const NoiseStream s(NoiseKey{uint64_t{1} << 40 | 9, 77}, 12345);
  // Start near a 32-bit boundary of the block counter, so its high word changes inside a chunk.
  uint32_t words[4][NoiseStream::kChunk];
  const uint64_t first = (uint64_t{1} << 32) - 10;
  s.blocks(first, words);
  for (int i = 0; i < NoiseStream::kChunk; ++i) {
    const Block b = s.block(first + static_cast<uint64_t>(i));
    for (int j = 0; j < 4; ++j) CHECK(words[j][i] == b[static_cast<size_t>(j)]);
  }
  constexpr double kTwoPi = 6.283185307179586;
  for (const int64_t n : {1, 7, 256, 1000, 2049}) {
    CAPTURE(n);
    std::vector<float> mask(static_cast<size_t>(n)), noise(static_cast<size_t>(n));
    s.bernoulli(mask.data(), n, 0.7, 2.0f);
    s.normal(noise.data(), n, 0.5f);
    int64_t mask_mismatches = 0, noise_mismatches = 0;
    for (int64_t e = 0; e < n; ++e) {
      const Block b = s.block(static_cast<uint64_t>(e) / 4);
      const auto word = [&](int j) { return b[static_cast<size_t>(j)]; };
      const float want_mask = word(static_cast<int>(e % 4)) < static_cast<uint64_t>(0.7 * 4294967296.0) ? 2.0f : 0.0f;
      const int pair = static_cast<int>(e % 4) / 2;
      const float r = std::sqrt(-2.0f * std::log(static_cast<float>(word_to_unit(word(2 * pair)))));
      const auto theta = static_cast<float>(kTwoPi * word_to_unit(word(2 * pair + 1)));
      const float want_noise = 0.5f * (e % 2 == 0 ? r * std::cos(theta) : r * std::sin(theta));
      mask_mismatches += mask[static_cast<size_t>(e)] != want_mask;
      const float got = noise[static_cast<size_t>(e)];
      noise_mismatches += std::abs(got - want_noise) > 1e-6f * std::max(1.0f, std::abs(want_noise));
    }
    CHECK(mask_mismatches == 0);
    CHECK(noise_mismatches == 0);
  }
}

// The stream's bits: Box-Muller with Eigen's vectorized log, sqrt, sin and cos over the
// words, as the first chunked generator computed it. ops/random.cpp computes sin and cos
// together (one range reduction for both, where Eigen makes one for each) and must keep
// these bits; add_normal adds the same draw to x.
TEST_CASE("normal draws are Box-Muller with Eigen's functions bit for bit, and add_normal adds the same draw") {
  const NoiseStream s(NoiseKey{21, 5, 3}, 404);
  constexpr int64_t kFirst = 300, kCount = 5000;
  std::vector<float> noise(kCount), base(kCount), added(kCount);
  s.normal(noise.data(), kCount, 0.25f, kFirst);
  for (int64_t e = 0; e < kCount; ++e) base[static_cast<size_t>(e)] = 0.001f * static_cast<float>(e) - 2.0f;
  s.add_normal(base.data(), added.data(), kCount, 0.25f, kFirst);
  Eigen::ArrayXf u(kCount), theta(kCount);
  for (int64_t e = 0; e < kCount; ++e) {
    const Block b = s.block(static_cast<uint64_t>(kFirst + e) / 4);
    const int pair = static_cast<int>((kFirst + e) % 4) / 2;
    u[e] = static_cast<float>(word_to_unit(b[static_cast<size_t>(2 * pair)]));
    theta[e] = static_cast<float>(6.283185307179586 * word_to_unit(b[static_cast<size_t>(2 * pair + 1)]));
  }
  const Eigen::ArrayXf r = (-2.0f * u.log()).sqrt();
  const Eigen::ArrayXf cos = r * theta.cos(), sin = r * theta.sin();
  int64_t mismatches = 0, added_mismatches = 0;
  for (int64_t e = 0; e < kCount; ++e) {
    const float want = 0.25f * ((kFirst + e) % 2 == 0 ? cos[e] : sin[e]);
    const auto i = static_cast<size_t>(e);
    mismatches += noise[i] != want;
    // The draw from normal(), scaled there, then added: a fused multiply-add (one
    // rounding) would differ.
    added_mismatches += added[i] != base[i] + noise[i];
  }
  CHECK(mismatches == 0);
  CHECK(added_mismatches == 0);
}

TEST_CASE("large draws, split across threads, do not depend on the thread count") {
  const NoiseStream s(NoiseKey{3, 4}, 5);
  constexpr int64_t n = 200003;
  std::vector<float> mask1(n), mask2(n), noise1(n), noise2(n);
  const int before = threads();
  set_threads(1);
  s.bernoulli(mask1.data(), n, 0.5, 2.0f);
  s.normal(noise1.data(), n, 1.0f);
  set_threads(2);
  s.bernoulli(mask2.data(), n, 0.5, 2.0f);
  s.normal(noise2.data(), n, 1.0f);
  set_threads(before);
  CHECK(mask1 == mask2);
  CHECK(noise1 == noise2);
}

TEST_CASE("dropout: keep rate 1-p, E[y] = x, exact replay from the key") {
  Graph g;
  const NodeId x = g.input("x", {kBatch, 50});
  g.add("dropout", {x}, {{"p", 0.2}}, "inverted");
  g.add("dropout", {x}, {{"p", 0.2}, {"rescale", int64_t{0}}}, "plain");
  const int64_t batch = 40;
  const std::vector<double> ones(static_cast<size_t>(batch * 50), 1.0);
  double kept = 0, mean_inverted = 0, mean_plain = 0;
  const int keys = 50;
  for (int k = 0; k < keys; ++k) {
    const NoiseKey key{7, static_cast<uint64_t>(k)};
    const auto y = evaluate(g, {{"x", ones}}, "inverted", batch, key);
    const auto z = evaluate(g, {{"x", ones}}, "plain", batch, key);
    for (size_t i = 0; i < y.size(); ++i) {
      CHECK((y[i] == 0.0 || y[i] == doctest::Approx(1.25)));
      kept += y[i] != 0.0;
      mean_inverted += y[i];
      mean_plain += z[i];
    }
  }
  const double n = static_cast<double>(keys) * static_cast<double>(ones.size());
  // 100 000 Bernoulli(0.8) draws: standard error 0.0013, so 0.01 is a 7-sigma band.
  CHECK(kept / n == doctest::Approx(0.8).epsilon(0.0125));
  CHECK(mean_inverted / n == doctest::Approx(1.0).epsilon(0.0125));
  CHECK(mean_plain / n == doctest::Approx(0.8).epsilon(0.0125));

  const auto first = evaluate(g, {{"x", ones}}, "inverted", batch, {3, 11});
  CHECK(first == evaluate(g, {{"x", ones}}, "inverted", batch, {3, 11}));
  CHECK(first != evaluate(g, {{"x", ones}}, "inverted", batch, {3, 12}));
}

TEST_CASE("gaussian_noise: zero mean, standard deviation sigma, E[y] = x") {
  Graph g;
  g.add("gaussian_noise", {g.input("x", {kBatch, 100})}, {{"sigma", 0.1}}, "noisy");
  const int64_t batch = 100;
  const std::vector<double> x(static_cast<size_t>(batch * 100), 2.0);
  double sum = 0, sum_sq = 0;
  const auto y = evaluate(g, {{"x", x}}, "noisy", batch, {1, 1});
  for (double v : y) {
    sum += v - 2.0;
    sum_sq += (v - 2.0) * (v - 2.0);
  }
  const double n = static_cast<double>(y.size());
  const double mean = sum / n, sd = std::sqrt(sum_sq / n - mean * mean);
  CHECK(std::abs(mean) < 5 * 0.1 / std::sqrt(n));
  CHECK(sd == doctest::Approx(0.1).epsilon(0.03));
}

TEST_CASE("normal_at draws any range of a stream's normal draw, as the whole draw has it") {
  const NoiseStream s(NoiseKey{4, 2, 7}, 99);
  std::vector<double> all(1300);
  s.normal(all.data(), static_cast<int64_t>(all.size()), 0.5);
  for (const auto& [first, n] : std::vector<std::pair<int64_t, int64_t>>{{0, 1300}, {70, 70}, {250, 13}, {511, 530}, {1299, 1}}) {
    std::vector<double> part(static_cast<size_t>(n));
    s.normal_at(part.data(), first, n, 0.5);
    for (int64_t i = 0; i < n; ++i) REQUIRE(part[static_cast<size_t>(i)] == all[static_cast<size_t>(first + i)]);
  }
}

TEST_CASE("a range of a draw equals those elements of the whole draw, at any offset and thread count") {
  const NoiseStream s(NoiseKey{3, 9}, 77);
  const int64_t n = 80000;  // several parallel tasks
  const int saved = threads();
  std::vector<float> mask(n), normal(n);
  s.bernoulli(mask.data(), n, 0.6, 2.5f);
  s.normal(normal.data(), n, 0.5f);
  for (int threads : {1, 2}) {
    set_threads(threads);
    for (int64_t first : {int64_t{0}, int64_t{1}, int64_t{255}, int64_t{256}, int64_t{4100}, int64_t{40000}}) {
      for (int64_t count : {int64_t{1}, int64_t{3}, int64_t{300}, n - first - 7}) {
        CAPTURE(first);
        CAPTURE(count);
        std::vector<float> part_mask(count), part_normal(count);
        s.bernoulli(part_mask.data(), count, 0.6, 2.5f, first);
        s.normal(part_normal.data(), count, 0.5f, first);
        CHECK(std::equal(part_mask.begin(), part_mask.end(), mask.begin() + first));
        CHECK(std::equal(part_normal.begin(), part_normal.end(), normal.begin() + first));
      }
    }
  }
  set_threads(saved);
}

}  // namespace test_noise
