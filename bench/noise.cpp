// The noise generator's rate on the calling thread (ops/random.h): Philox blocks, Gaussian
// draws (a weight-fuzzing draw of the compact tensor network's T, 70³ = 343,000 normals, is
// the size measured) and dropout masks, in elements per second.
// Prints one JSON object per kind: {"side": "pens", "draw", "elements", "per_s", "ns_each"}.
//
//   build/bench/noise [--reps N] [--elements E]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "pens/ops/random.h"

namespace {

template <class Draw>
double best_seconds(int reps, const Draw& draw) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    draw(static_cast<uint64_t>(r));
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

void report(const char* draw, int64_t elements, double seconds, float checksum) {
  std::printf(
      "{\"side\": \"pens\", \"draw\": \"%s\", \"elements\": %lld, \"per_s\": %.0f, \"ns_each\": %.3f, "
      "\"checksum\": %.6g}\n",
      draw, static_cast<long long>(elements), elements / seconds, 1e9 * seconds / elements, checksum);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 50;
  int64_t elements = 343000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--reps" && i + 1 < argc) {
      reps = std::stoi(argv[++i]);
    } else if (arg == "--elements" && i + 1 < argc) {
      elements = std::stoll(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: noise [--reps N] [--elements E]\n");
      return 2;
    }
  }
  // Below ops/random.cpp's parallel threshold a draw stays on the calling thread; above it
  // the pool takes it, which has one thread unless set_threads is called: one core.
  std::vector<float> out(static_cast<size_t>(elements));
  const auto stream = [](uint64_t step) { return pens::NoiseStream(pens::NoiseKey{7, step, 3}, 11); };

  uint32_t sink = 0;
  const int64_t blocks = elements / (4 * pens::NoiseStream::kChunk);
  const double philox = best_seconds(reps, [&](uint64_t step) {
    const pens::NoiseStream s = stream(step);
    uint32_t words[4][pens::NoiseStream::kChunk];
    for (int64_t b = 0; b < blocks; ++b) {
      s.blocks(static_cast<uint64_t>(b) * pens::NoiseStream::kChunk, words);
      sink ^= words[0][0] ^ words[3][pens::NoiseStream::kChunk - 1];
    }
  });
  report("philox_words", blocks * 4 * pens::NoiseStream::kChunk, philox, static_cast<float>(sink & 0xff));

  const double normal =
      best_seconds(reps, [&](uint64_t step) { stream(step).normal(out.data(), elements, 0.02f); });
  report("normal", elements, normal, out[elements / 2]);

  const double mask =
      best_seconds(reps, [&](uint64_t step) { stream(step).bernoulli(out.data(), elements, 0.5, 2.0f); });
  report("bernoulli", elements, mask, out[elements / 2]);
  return 0;
}
