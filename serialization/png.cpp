#include "pens/serialization/png.h"

#include <png.h>

#include <csetjmp>

#include "pens/ops/ir/error.h"
#include "pens/serialization/files.h"

namespace pens {

namespace {

void append(png_structp png, png_bytep data, png_size_t size) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), size);
}

// libpng reports errors by longjmp to the setjmp in encode(); between the two there are
// only libpng's C frames, so no destructor is skipped. Its text is kept for the Error.
void remember_error(png_structp png, png_const_charp message) {
  *static_cast<std::string*>(png_get_error_ptr(png)) = message;
  png_longjmp(png, 1);
}

// Fills `out`; returns false (with `error` set) when libpng failed.
bool encode(int64_t width, int64_t height, const uint8_t* pixels, std::string& out, std::string& error) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &error, remember_error, nullptr);
  if (!png) {
    error = "out of memory";
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    if (error.empty()) error = "out of memory";
    return false;
  }
  png_set_write_fn(png, &out, append, nullptr);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8, PNG_COLOR_TYPE_GRAY,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int64_t y = 0; y < height; ++y) png_write_row(png, pixels + y * width);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

}  // namespace

std::string encode_png_gray(int64_t width, int64_t height, const std::vector<uint8_t>& pixels) {
  if (width < 1 || height < 1 || width > (1 << 20) || height > (1 << 20)) {
    fail("PNG of ", width, " x ", height, " pixels: sizes must be in 1..2^20");
  }
  if (static_cast<int64_t>(pixels.size()) != width * height) {
    fail("PNG of ", width, " x ", height, " pixels given ", pixels.size(), " pixels");
  }
  std::string out, error;
  if (!encode(width, height, pixels.data(), out, error)) fail("PNG of ", width, " x ", height, " pixels: ", error);
  return out;
}

void write_png_gray(const std::string& path, int64_t width, int64_t height, const std::vector<uint8_t>& pixels) {
  write_file_atomically(path, encode_png_gray(width, height, pixels));
}

}  // namespace pens
