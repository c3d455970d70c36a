// The IDX format of the MNIST files: a big-endian header (two zero bytes, a type code,
// the number of dimensions, then each dimension as a 32-bit count) followed by the
// elements. pens reads the unsigned-byte type, the only one MNIST uses.
//
// The reader trusts nothing: the size the header promises must equal the file's size
// exactly before anything is allocated, so a truncated, padded or corrupt file is an
// Error naming the file and the fault, never a crash or an absurd allocation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pens/ops/ir/memory.h"

namespace pens {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // row-major, dims multiplied out
  MemoryCharge memory;        // data against pens' memory limit (ops/ir/memory.h)
};

// `expected_rank` is the number of dimensions the caller needs (3 for images, 1 for labels).
IdxArray read_idx(const std::string& path, int expected_rank);

// The same from bytes already in memory; `source` names them in errors.
IdxArray parse_idx(const std::string& bytes, const std::string& source, int expected_rank);

}  // namespace pens
