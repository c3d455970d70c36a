// SHA-256 (FIPS 180-4), for the checksums of parameter sidecar files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pens {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  std::string hex_digest();  // finishes; the object is spent afterwards

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes
};

std::string sha256_hex(std::string_view bytes);

}  // namespace pens
