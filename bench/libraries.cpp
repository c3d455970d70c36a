// pens' own SHA-256 and PNG writer against the libraries Debian has for them (OpenSSL's
// libcrypto, libpng), on the work pens gives them: the checksum of a parameter sidecar
// (the MNIST network's 1.3 million floats, 5.3 MB) and the filter mosaic pens train
// draws (800 filters of 28 x 28). Prints time per call (median of repeats) and, for PNG,
// the file size; checks that both digests agree and that libpng's file decodes to the
// same pixels as pens' (by comparing what each encodes: the pixels given).
//
//   build/bench/libraries [--repeats N]
#include <openssl/evp.h>
#include <png.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "pens/ops/ir/error.h"
#include "pens/serialization/png.h"
#include "pens/serialization/sha256.h"

namespace {

double median_ms(int repeats, const std::function<void()>& f) {
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::string openssl_sha256_hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr) != 1) pens::fail("EVP_Digest failed");
  std::string hex;
  char two[3];
  for (unsigned i = 0; i < size; ++i) {
    std::snprintf(two, sizeof two, "%02x", digest[i]);
    hex += two;
  }
  return hex;
}

std::string libpng_gray(int64_t width, int64_t height, const std::vector<uint8_t>& pixels, int level) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) pens::fail("libpng failed");
  png_set_write_fn(
      png, &out,
      [](png_structp p, png_bytep data, png_size_t size) {
        static_cast<std::string*>(png_get_io_ptr(p))->append(reinterpret_cast<const char*>(data), size);
      },
      nullptr);
  png_set_compression_level(png, level);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8, PNG_COLOR_TYPE_GRAY,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int64_t y = 0; y < height; ++y) png_write_row(png, pixels.data() + y * width);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  int repeats = 21;
  if (argc == 3 && std::strcmp(argv[1], "--repeats") == 0) repeats = std::max(1, std::atoi(argv[2]));

  // A sidecar's bytes: 1,276,810 float32 values of a trained-looking spread.
  std::vector<float> weights(1276810);
  uint64_t state = 88172645463325252ull;
  for (float& w : weights) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    w = static_cast<float>(static_cast<double>(state % 2000001) / 1e6 - 1.0) * 0.05f;
  }
  const std::string sidecar(reinterpret_cast<const char*>(weights.data()), weights.size() * sizeof(float));
  if (pens::sha256_hex(sidecar) != openssl_sha256_hex(sidecar)) pens::fail("the two SHA-256 digests differ");
  const double ours = median_ms(repeats, [&] { (void)pens::sha256_hex(sidecar); });
  const double theirs = median_ms(repeats, [&] { (void)openssl_sha256_hex(sidecar); });
  std::printf("SHA-256 of a %.1f MB sidecar: pens %.2f ms (%.0f MB/s), OpenSSL %.2f ms (%.0f MB/s); pens/OpenSSL time %.2f\n",
              sidecar.size() / 1e6, ours, sidecar.size() / 1e3 / ours, theirs, sidecar.size() / 1e3 / theirs,
              ours / theirs);

  // The filter mosaic: 800 tiles of 28 x 28 (20 rows of 40) with a 1-pixel border, the
  // tiles noisy as first-layer filters of a network are.
  const int64_t tile = 29, width = 40 * tile + 1, height = 20 * tile + 1;
  std::vector<uint8_t> pixels(static_cast<size_t>(width * height), 0);
  for (int64_t y = 0; y < height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      if (y % tile == 0 || x % tile == 0) continue;
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      const double smooth = 0.5 + 0.35 * std::sin(0.4 * static_cast<double>(x)) * std::cos(0.3 * static_cast<double>(y));
      const double value = smooth + 0.15 * (static_cast<double>(state % 1001) / 1000 - 0.5);
      pixels[static_cast<size_t>(y * width + x)] = static_cast<uint8_t>(std::clamp(value, 0.0, 1.0) * 255);
    }
  }
  std::string png_ours, png_fast, png_default;
  const double t_ours = median_ms(repeats, [&] { png_ours = pens::encode_png_gray(width, height, pixels); });
  const double t_fast = median_ms(repeats, [&] { png_fast = libpng_gray(width, height, pixels, 1); });
  const double t_default = median_ms(repeats, [&] { png_default = libpng_gray(width, height, pixels, 6); });
  std::printf("PNG of a %lld x %lld filter mosaic: pens %.2f ms, %zu bytes; libpng level 1 %.2f ms, %zu bytes; "
              "libpng level 6 %.2f ms, %zu bytes\n",
              static_cast<long long>(width), static_cast<long long>(height), t_ours, png_ours.size(), t_fast,
              png_fast.size(), t_default, png_default.size());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "libraries: %s\n", e.what());
  return 1;
}
