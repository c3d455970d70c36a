#include "pens/serialization/npy.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "pens/ops/ir/error.h"
#include "pens/serialization/files.h"

namespace pens {

namespace {

// Larger files than this are refused before they are read (a wrong path to a disk image,
// say); the memory limit still applies below it.
constexpr uint64_t kMaxNpyBytes = uint64_t{1} << 36;
constexpr char kNpyMagic[] = "\x93NUMPY";

// The value of `key` in the header's dict literal: the text from after "'key':" up to the
// next top-level comma or the closing brace (a tuple's commas are inside parentheses).
std::string header_value(const std::string& header, const std::string& key, const std::string& source) {
  size_t at = std::string::npos;
  for (const char quote : {'\'', '"'}) {
    const std::string token = std::string(1, quote) + key + quote;
    if (at = header.find(token); at != std::string::npos) {
      at += token.size();
      break;
    }
  }
  if (at == std::string::npos) fail(source, ": the .npy header has no '", key, "' (header: ", header, ")");
  while (at < header.size() && (std::isspace(static_cast<unsigned char>(header[at])) != 0)) ++at;
  if (at >= header.size() || header[at] != ':') fail(source, ": the .npy header's '", key, "' has no value");
  ++at;
  int depth = 0;
  size_t end = at;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  std::string value = header.substr(at, end - at);
  const auto not_space = [](unsigned char c) { return std::isspace(c) == 0; };
  value.erase(value.begin(), std::find_if(value.begin(), value.end(), not_space));
  value.erase(std::find_if(value.rbegin(), value.rend(), not_space).base(), value.end());
  return value;
}

std::vector<int64_t> parse_shape(const std::string& text, const std::string& source) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') {
    fail(source, ": the .npy header's shape ", text, " is not a tuple");
  }
  std::vector<int64_t> shape;
  size_t i = 1;
  while (i < text.size() - 1) {
    while (i < text.size() - 1 && (text[i] == ' ' || text[i] == ',')) ++i;
    if (i >= text.size() - 1) break;
    size_t end = i;
    while (end < text.size() - 1 && std::isdigit(static_cast<unsigned char>(text[end])) != 0) ++end;
    // A trailing L: Python 2's long integers, which old NumPy wrote.
    if (end == i || end - i > 15) fail(source, ": the .npy header's shape ", text, " is not a tuple of counts");
    shape.push_back(std::stoll(text.substr(i, end - i)));
    i = end;
    if (i < text.size() - 1 && text[i] == 'L') ++i;
  }
  return shape;
}

// Element `i` of `bytes` (little-endian) as a double.
template <class T>
double element(const char* data, uint64_t i) {
  T v;
  std::memcpy(&v, data + i * sizeof(T), sizeof(T));
  return static_cast<double>(v);
}

}  // namespace

NpyArray parse_npy(const std::string& bytes, const std::string& source) {
  if (bytes.size() < 10 || bytes.compare(0, 6, kNpyMagic) != 0) {
    fail(source, ": not a .npy file (it does not start with \\x93NUMPY; numpy.save writes .npy files)");
  }
  const auto major = static_cast<uint8_t>(bytes[6]);
  if (major < 1 || major > 3) fail(source, ": .npy format version ", static_cast<int>(major), " is not one of 1, 2, 3");
  const size_t length_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + length_bytes) fail(source, ": truncated .npy header");
  uint64_t header_length = 0;
  for (size_t k = 0; k < length_bytes; ++k) header_length |= uint64_t{static_cast<uint8_t>(bytes[8 + k])} << (8 * k);
  const uint64_t data_start = 8 + length_bytes + header_length;
  if (data_start > bytes.size()) {
    fail(source, ": truncated .npy header: it promises ", header_length, " bytes, the file holds ",
         bytes.size() - 8 - length_bytes);
  }
  const std::string header = bytes.substr(8 + length_bytes, header_length);

  NpyArray out;
  const std::string descr = header_value(header, "descr", source);
  if (descr.size() < 4 || (descr.front() != '\'' && descr.front() != '"')) {
    // A structured array's descr is a list: named up to its first field.
    fail(source, ": the .npy dtype ", descr.substr(0, 16), descr.size() > 16 ? "..." : "",
         " is not a simple type (a structured array?)");
  }
  out.dtype = descr.substr(1, descr.size() - 2);
  const char order = out.dtype[0];
  const char kind = out.dtype[1];
  const int size = std::atoi(out.dtype.c_str() + 2);
  if (order == '>' && size > 1) fail(source, ": dtype ", out.dtype, " is big-endian; save it little-endian (astype('<", kind, size, "'))");
  const bool known = (kind == 'f' && (size == 4 || size == 8)) ||
                     ((kind == 'i' || kind == 'u') && (size == 1 || size == 2 || size == 4 || size == 8)) ||
                     (kind == 'b' && size == 1);
  if (!known || (order != '<' && order != '|' && order != '=')) {
    fail(source, ": dtype ", out.dtype, " is not supported (float32/64, signed or unsigned integers, bool)");
  }
  if (header_value(header, "fortran_order", source) != "False") {
    fail(source, ": the array is in Fortran order; save numpy.ascontiguousarray(a)");
  }
  out.shape = parse_shape(header_value(header, "shape", source), source);
  uint64_t elements = 1;
  for (const int64_t d : out.shape) {
    if (d > 0 && elements > kMaxNpyBytes / static_cast<uint64_t>(d)) {
      fail(source, ": the .npy shape promises more than ", kMaxNpyBytes, " elements");
    }
    elements *= static_cast<uint64_t>(d);
  }
  const uint64_t data_bytes = bytes.size() - data_start;
  const uint64_t promised = elements * static_cast<uint64_t>(size);
  if (data_bytes != promised) {
    fail(source, ": ", data_bytes < promised ? "truncated" : "trailing bytes", ": the header promises ", promised,
         " bytes of data (", elements, " elements of ", out.dtype, "), the file holds ", data_bytes);
  }
  out.memory = MemoryCharge(bytes_of(elements, sizeof(float), source), source);
  out.data.resize(static_cast<size_t>(elements));
  const char* data = bytes.data() + data_start;
  for (uint64_t i = 0; i < elements; ++i) {
    double v = 0;
    switch (kind) {
      case 'f': v = size == 4 ? element<float>(data, i) : element<double>(data, i); break;
      case 'b': v = element<uint8_t>(data, i) != 0 ? 1 : 0; break;
      case 'i':
        v = size == 1 ? element<int8_t>(data, i) : size == 2 ? element<int16_t>(data, i)
            : size == 4 ? element<int32_t>(data, i) : element<int64_t>(data, i);
        break;
      default:
        v = size == 1 ? element<uint8_t>(data, i) : size == 2 ? element<uint16_t>(data, i)
            : size == 4 ? element<uint32_t>(data, i) : element<uint64_t>(data, i);
    }
    out.integral = out.integral && std::isfinite(v) && v == std::floor(v);
    out.data[static_cast<size_t>(i)] = static_cast<float>(v);
  }
  return out;
}

NpyArray read_npy(const std::string& path) { return parse_npy(read_file(path, kMaxNpyBytes), path); }

}  // namespace pens
