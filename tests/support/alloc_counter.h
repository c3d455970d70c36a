// Counts heap allocations made by any code in the test binary (pens, Eigen, the C++
// runtime, OpenMP threads) while a CountAllocations object is alive, and the bytes still
// held from them. It interposes malloc and friends (glibc), so it sees what operator new
// sees and also what Eigen's aligned_malloc sees.
#pragma once

#include <cstdint>

// Under AddressSanitizer the sanitizer owns malloc; the counter then counts nothing and
// says so through CountAllocations::available().
#if defined(__SANITIZE_ADDRESS__)
#define PENS_COUNT_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PENS_COUNT_ALLOCATIONS 0
#endif
#endif
#ifndef PENS_COUNT_ALLOCATIONS
#define PENS_COUNT_ALLOCATIONS 1
#endif

namespace pens::testing {

class CountAllocations {
 public:
  static constexpr bool available() { return PENS_COUNT_ALLOCATIONS != 0; }
  CountAllocations();
  ~CountAllocations();
  int64_t count() const;       // allocations since construction
  int64_t live_bytes() const;  // bytes allocated minus bytes freed since construction
};

}  // namespace pens::testing
