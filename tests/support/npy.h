// Writing .npy files in tests, as numpy.save does (format 1.0, the header padded so the
// data starts at a multiple of 64 bytes).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "pens/serialization/files.h"

namespace pens::testing {

// The bytes of a .npy file of `dtype` (e.g. "<f4") and `shape` holding `data` (raw
// little-endian elements).
inline std::string npy_bytes(const std::string& dtype, const std::vector<int64_t>& shape, const std::string& data,
                             const std::string& fortran_order = "False") {
  std::string dims;  // as Python writes tuples: (), (3,), (3, 4)
  for (size_t i = 0; i < shape.size(); ++i) dims += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string header = "{'descr': '" + dtype + "', 'fortran_order': " + fortran_order + ", 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

template <class T>
std::string raw_bytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

inline void write_npy_floats(const std::string& path, const std::vector<int64_t>& shape, const std::vector<float>& v) {
  write_file_atomically(path, npy_bytes("<f4", shape, raw_bytes(v)));
}

inline void write_npy_labels(const std::string& path, const std::vector<int64_t>& labels) {
  write_file_atomically(path, npy_bytes("<i8", {static_cast<int64_t>(labels.size())}, raw_bytes(labels)));
}

}  // namespace pens::testing
