// PNG files of 8-bit grayscale images (filter mosaics of trained weights), written with
// libpng (docs/architecture.md says why).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pens {

// The PNG file bytes of a width × height image, pixels row-major.
std::string encode_png_gray(int64_t width, int64_t height, const std::vector<uint8_t>& pixels);

// Writes it atomically.
void write_png_gray(const std::string& path, int64_t width, int64_t height, const std::vector<uint8_t>& pixels);

}  // namespace pens
