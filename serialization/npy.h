// The .npy format NumPy writes (numpy.save): a magic string, a version, a header that is a
// Python dict literal ({'descr': '<f4', 'fortran_order': False, 'shape': (60000, 784), })
// padded with spaces to an aligned length, then the elements. pens reads versions 1 to 3,
// C order, little-endian (or byte) numbers of the common dtypes, as float32 values.
//
// As the IDX reader, it trusts nothing: the header must parse, and the size it promises
// must equal the file's size exactly before anything is allocated, so a truncated, padded
// or corrupt file is an Error naming the file and the fault.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pens/ops/ir/memory.h"

namespace pens {

struct NpyArray {
  std::vector<int64_t> shape;  // () for a scalar
  std::string dtype;           // the header's descr, e.g. "<f4"
  std::vector<float> data;     // row-major, every element converted to float32
  // Whether every element was an exact integer (any integer dtype; floats with no
  // fractional part): what labels must be.
  bool integral = true;
  MemoryCharge memory;  // data against pens' memory limit (ops/ir/memory.h)
};

NpyArray read_npy(const std::string& path);

// The same from bytes already in memory; `source` names them in errors.
NpyArray parse_npy(const std::string& bytes, const std::string& source);

}  // namespace pens
