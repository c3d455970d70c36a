// The IDX reader and the MNIST loader: valid files read back exactly; every kind of
// corruption is an Error that names the file and the fault, before any large allocation.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "pens/models/mnist.h"
#include "pens/serialization/files.h"
#include "pens/serialization/idx.h"
#include "tests/support/helpers.h"
#include "tests/support/temp_dir.h"

namespace test_idx {

using namespace pens;

namespace {

std::string idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::string b = {'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<char>((d >> shift) & 0xff));
  }
  b.append(data.begin(), data.end());
  return b;
}

// Three 2 x 2 images and their labels.
void write_tiny_mnist(const std::string& dir, const std::string& prefix, std::vector<uint8_t> labels = {7, 0, 9}) {
  const auto n = static_cast<uint32_t>(labels.size());
  std::vector<uint8_t> pixels;
  for (uint32_t i = 0; i < 4 * n; ++i) pixels.push_back(static_cast<uint8_t>(i * 20));
  write_file_atomically(dir + "/" + prefix + "-images-idx3-ubyte", idx_bytes(0x08, {n, 2, 2}, pixels));
  write_file_atomically(dir + "/" + prefix + "-labels-idx1-ubyte", idx_bytes(0x08, {n}, labels));
}

}  // namespace

TEST_CASE("a valid IDX file reads back its dimensions and bytes") {
  const IdxArray a = parse_idx(idx_bytes(0x08, {2, 3, 1}, {1, 2, 3, 4, 5, 6}), "mem", 3);
  CHECK(a.dims == std::vector<int64_t>{2, 3, 1});
  CHECK(a.data == std::vector<uint8_t>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("the IDX reader rejects each kind of corruption, naming the source and the fault") {
  const std::string good = idx_bytes(0x08, {2, 2, 2}, std::vector<uint8_t>(8, 1));
  CHECK_ERROR_MENTIONS(parse_idx("", "f.idx", 3), "f.idx", "shorter than the 4-byte magic");
  CHECK_ERROR_MENTIONS(parse_idx("\x1f\x8b\x08\x03" + good.substr(4), "f.idx", 3), "f.idx", "two zero bytes", "gzip");
  CHECK_ERROR_MENTIONS(parse_idx(idx_bytes(0x0D, {2, 2, 2}, std::vector<uint8_t>(32, 0)), "f.idx", 3), "f.idx",
                       "element type 0xd");
  CHECK_ERROR_MENTIONS(parse_idx(idx_bytes(0x08, {8}, std::vector<uint8_t>(8, 0)), "f.idx", 3), "f.idx",
                       "1 dimensions, expected 3");
  CHECK_ERROR_MENTIONS(parse_idx(good.substr(0, 9), "f.idx", 3), "f.idx", "truncated header");
  CHECK_ERROR_MENTIONS(parse_idx(good.substr(0, good.size() - 1), "f.idx", 3), "f.idx", "truncated",
                       "promises 8 bytes", "holds 7");
  CHECK_ERROR_MENTIONS(parse_idx(good + "x", "f.idx", 3), "f.idx", "trailing bytes");
  CHECK_ERROR_MENTIONS(parse_idx(idx_bytes(0x08, {2, 0, 2}, {}), "f.idx", 3), "f.idx", "dimension 1 is 0");
  // A header promising terabytes is refused from the header alone.
  CHECK_ERROR_MENTIONS(parse_idx(idx_bytes(0x08, {0xffffffffu, 0xffffffffu, 28}, {}), "f.idx", 3), "f.idx",
                       "promises more than");
}

TEST_CASE("MNIST loads from a folder of IDX files, scaled to [0, 1]") {
  testing::TempDir dir;
  write_tiny_mnist(dir.path(), "train");
  const Dataset d = load_mnist(dir.path(), "train");
  CHECK(d.size == 3);
  CHECK(d.dim == 4);
  CHECK(d.classes == 10);
  CHECK(d.y == std::vector<float>{7, 0, 9});
  CHECK(d.x[0] == 0.0f);
  CHECK(d.x[1] == doctest::Approx(20.0 / 255.0));
  CHECK(d.x[11] == doctest::Approx(220.0 / 255.0));
}

TEST_CASE("MNIST loading names the file that is missing, mismatched or out of range") {
  testing::TempDir dir;
  CHECK_ERROR_MENTIONS(load_mnist(dir.path(), "test"), "t10k-images-idx3-ubyte", "no such file", "fetch-mnist.sh");
  CHECK_ERROR_MENTIONS(load_mnist(dir.path(), "validation"), "'validation'", "train or test");
  write_tiny_mnist(dir.path(), "t10k", {1, 2, 10});
  CHECK_ERROR_MENTIONS(load_mnist(dir.path(), "test"), "t10k-labels-idx1-ubyte", "label 10 of example 2", "outside 0-9");
  write_tiny_mnist(dir.path(), "t10k");
  write_file_atomically(dir / "t10k-labels-idx1-ubyte", idx_bytes(0x08, {2}, {1, 2}));
  CHECK_ERROR_MENTIONS(load_mnist(dir.path(), "test"), "holds 3 images", "holds 2 labels");
}

}  // namespace test_idx
