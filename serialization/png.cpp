#include "pens/serialization/png.h"

#include <array>

#include "pens/ops/ir/error.h"
#include "pens/serialization/files.h"

namespace pens {

namespace {

uint32_t crc32(const std::string& bytes, size_t from) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  uint32_t c = 0xffffffffu;
  for (size_t i = from; i < bytes.size(); ++i) c = table[(c ^ static_cast<uint8_t>(bytes[i])) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

void put_u32_be(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

void put_chunk(std::string& out, const char* type, const std::string& data) {
  put_u32_be(out, static_cast<uint32_t>(data.size()));
  const size_t start = out.size();
  out += type;
  out += data;
  put_u32_be(out, crc32(out, start));
}

}  // namespace

std::string encode_png_gray(int64_t width, int64_t height, const std::vector<uint8_t>& pixels) {
  if (width <= 0 || height <= 0 || width > (1 << 20) || height > (1 << 20)) {
    fail("PNG of ", width, " x ", height, " pixels: sizes must be in 1..2^20");
  }
  if (static_cast<int64_t>(pixels.size()) != width * height) {
    fail("PNG of ", width, " x ", height, " pixels given ", pixels.size(), " pixels");
  }
  // Scanlines, each led by filter type 0 (none).
  std::string raw;
  raw.reserve(static_cast<size_t>((width + 1) * height));
  for (int64_t r = 0; r < height; ++r) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char*>(pixels.data() + r * width), static_cast<size_t>(width));
  }
  // zlib: header, stored deflate blocks of at most 65535 bytes, Adler-32 of the raw data.
  std::string z = {'\x78', '\x01'};
  constexpr size_t kBlock = 65535;
  for (size_t at = 0; at < raw.size(); at += kBlock) {
    const size_t n = std::min(kBlock, raw.size() - at);
    z.push_back(at + n == raw.size() ? '\x01' : '\x00');
    z.push_back(static_cast<char>(n & 0xff));
    z.push_back(static_cast<char>(n >> 8));
    z.push_back(static_cast<char>(~n & 0xff));
    z.push_back(static_cast<char>((~n >> 8) & 0xff));
    z.append(raw, at, n);
  }
  uint32_t a = 1, b = 0;
  for (char c : raw) {
    a = (a + static_cast<uint8_t>(c)) % 65521;
    b = (b + a) % 65521;
  }
  put_u32_be(z, b << 16 | a);

  std::string png = "\x89PNG\r\n\x1a\n";
  std::string header;
  put_u32_be(header, static_cast<uint32_t>(width));
  put_u32_be(header, static_cast<uint32_t>(height));
  header += {'\x08', '\x00', '\x00', '\x00', '\x00'};  // 8 bits, grayscale, deflate, filter 0, no interlace
  put_chunk(png, "IHDR", header);
  put_chunk(png, "IDAT", z);
  put_chunk(png, "IEND", "");
  return png;
}

void write_png_gray(const std::string& path, int64_t width, int64_t height, const std::vector<uint8_t>& pixels) {
  write_file_atomically(path, encode_png_gray(width, height, pixels));
}

}  // namespace pens
