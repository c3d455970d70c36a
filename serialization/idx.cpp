#include "pens/serialization/idx.h"

#include "pens/ops/ir/error.h"
#include "pens/serialization/files.h"

namespace pens {

namespace {

constexpr uint8_t kUnsignedByte = 0x08;
// MNIST's largest file is 47 MB; a limit well above it stops a wrong path (a disk image,
// say) from being read into memory.
constexpr uint64_t kMaxIdxBytes = uint64_t{1} << 31;

uint32_t big_endian_u32(const std::string& b, size_t at) {
  return static_cast<uint32_t>(static_cast<uint8_t>(b[at])) << 24 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 1])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 2])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 3]));
}

}  // namespace

IdxArray parse_idx(const std::string& bytes, const std::string& source, int expected_rank) {
  if (bytes.size() < 4) fail(source, ": not an IDX file: ", bytes.size(), " bytes, shorter than the 4-byte magic number");
  const auto type = static_cast<uint8_t>(bytes[2]);
  const auto rank = static_cast<uint8_t>(bytes[3]);
  if (bytes[0] != 0 || bytes[1] != 0) {
    fail(source, ": not an IDX file: the magic number must start with two zero bytes (is it still gzip-compressed?)");
  }
  if (type != kUnsignedByte) {
    fail(source, ": IDX element type 0x", std::hex, static_cast<int>(type),
         " is not supported; MNIST files hold unsigned bytes (0x08)");
  }
  if (rank != expected_rank) {
    fail(source, ": an IDX file of ", static_cast<int>(rank), " dimensions, expected ", expected_rank,
         expected_rank == 1 ? " (labels)" : expected_rank == 3 ? " (images)" : "");
  }
  const size_t header = 4 + 4 * size_t{rank};
  if (bytes.size() < header) {
    fail(source, ": truncated header: ", bytes.size(), " bytes, the header alone needs ", header);
  }
  IdxArray out;
  uint64_t elements = 1;
  for (int i = 0; i < rank; ++i) {
    const uint32_t d = big_endian_u32(bytes, 4 + 4 * static_cast<size_t>(i));
    if (d == 0) fail(source, ": dimension ", i, " is 0");
    out.dims.push_back(d);
    elements *= d;
    if (elements > kMaxIdxBytes) fail(source, ": the header promises more than ", kMaxIdxBytes, " elements");
  }
  if (bytes.size() - header != elements) {
    fail(source, ": ", bytes.size() - header < elements ? "truncated" : "trailing bytes", ": the header promises ",
         elements, " bytes of data, the file holds ", bytes.size() - header);
  }
  out.memory = MemoryCharge(elements, source);
  out.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return out;
}

IdxArray read_idx(const std::string& path, int expected_rank) {
  return parse_idx(read_file(path, kMaxIdxBytes), path, expected_rank);
}

}  // namespace pens
