// Counts heap allocations made by any code in the test binary (pens, Eigen, the C++
// runtime, OpenMP threads) while a CountAllocations object is alive, and the bytes still
// held from them. It interposes malloc and friends (glibc), so it sees what operator new
// sees and also what Eigen's aligned_malloc sees.
#pragma once

#include <cstdint>

namespace pens::testing {

class CountAllocations {
 public:
  CountAllocations();
  ~CountAllocations();
  int64_t count() const;       // allocations since construction
  int64_t live_bytes() const;  // bytes allocated minus bytes freed since construction
};

}  // namespace pens::testing
