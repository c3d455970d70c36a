// The PNG writer: what it writes decodes (with libpng's reader) to the pixels given.
#include <doctest/doctest.h>
#include <png.h>

#include <cstring>
#include <string>
#include <vector>

#include "pens/ops/ir/error.h"
#include "pens/serialization/png.h"

namespace test_png {

namespace {

struct Decoded {
  png_uint_32 width = 0, height = 0;
  int depth = 0, color = 0;
  std::vector<uint8_t> pixels;
};

Decoded decode(const std::string& bytes) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  REQUIRE(png_image_begin_read_from_memory(&image, bytes.data(), bytes.size()) != 0);
  Decoded d{image.width, image.height, 8, static_cast<int>(image.format), {}};
  image.format = PNG_FORMAT_GRAY;
  d.pixels.resize(PNG_IMAGE_SIZE(image));
  REQUIRE(png_image_finish_read(&image, nullptr, d.pixels.data(), 0, nullptr) != 0);
  return d;
}

}  // namespace

TEST_CASE("a grayscale PNG decodes to the pixels it was given") {
  const int64_t width = 37, height = 11;
  std::vector<uint8_t> pixels(width * height);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 7919) % 256);
  const std::string bytes = pens::encode_png_gray(width, height, pixels);
  CHECK(bytes.substr(1, 3) == "PNG");
  const Decoded d = decode(bytes);
  CHECK(d.width == width);
  CHECK(d.height == height);
  CHECK(d.color == PNG_FORMAT_GRAY);
  CHECK(d.pixels == pixels);
}

TEST_CASE("a PNG of no pixels or of the wrong pixel count is refused") {
  CHECK_THROWS_WITH_AS(pens::encode_png_gray(0, 3, {}), doctest::Contains("sizes must be in 1..2^20"), pens::Error);
  CHECK_THROWS_WITH_AS(pens::encode_png_gray(2, 2, {1, 2, 3}), doctest::Contains("given 3 pixels"), pens::Error);
}

}  // namespace test_png
