// The arenas of destroyed tapes, kept per thread for the next tapes it compiles
// (autodiff/tape.cpp's alone: not an installed header).
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <vector>

namespace pens {

// Arenas of destroyed tapes, kept for the next tapes this thread compiles. A model with a
// graph per example (a tree each) compiles tens of tapes a step; a fresh arena of that
// size comes from the kernel as new pages, faulted in on first touch, and that cost more
// than the step's arithmetic (docs/performance-history.md, trees). At most kCachedArenaBytes stay
// cached per thread, the oldest given back first.
constexpr size_t kCachedArenaBytes = size_t{64} << 20;
inline thread_local bool arena_cache_gone = false;  // trivially destructible: readable during thread exit

template <class T>
class ArenaCache {
 public:
  using Buffer = std::vector<T, Eigen::aligned_allocator<T>>;

  ~ArenaCache() { arena_cache_gone = true; }

  // n zeros, in the smallest cached buffer that holds them, or in a new one.
  static Buffer zeros(size_t n) {
    Buffer out;
    if (!arena_cache_gone) out = local().take(n);
    out.assign(n, T(0));
    return out;
  }

  static void give_back(Buffer&& buffer) {
    if (!arena_cache_gone) local().keep(std::move(buffer));
  }

 private:
  static ArenaCache& local() {
    thread_local ArenaCache cache;
    return cache;
  }

  // A buffer at most twice the size asked for: a tape keeps its arena for as long as it
  // lives, and a tree run's many small tapes, compiled now and then for a new level width,
  // once took the tens of megabytes an evaluation's forest had given back, each for good
  // (a CTN run grew by about 95 MB an epoch).
  Buffer take(size_t n) {
    auto best = buffers_.end();
    for (auto it = buffers_.begin(); it != buffers_.end(); ++it) {
      const size_t capacity = it->capacity();
      if (capacity >= n && capacity <= 2 * n && (best == buffers_.end() || capacity < best->capacity())) best = it;
    }
    if (best == buffers_.end()) return {};
    Buffer out = std::move(*best);
    buffers_.erase(best);
    bytes_ -= out.capacity() * sizeof(T);
    return out;
  }

  void keep(Buffer&& buffer) {
    const size_t bytes = buffer.capacity() * sizeof(T);
    if (bytes == 0 || bytes > kCachedArenaBytes) return;
    while (bytes_ + bytes > kCachedArenaBytes) {
      bytes_ -= buffers_.front().capacity() * sizeof(T);
      buffers_.erase(buffers_.begin());
    }
    bytes_ += bytes;
    buffers_.push_back(std::move(buffer));
  }

  std::vector<Buffer> buffers_;  // oldest first
  size_t bytes_ = 0;
};

}  // namespace pens
