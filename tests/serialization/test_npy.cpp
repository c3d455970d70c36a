// The .npy reader against files laid out as numpy.save writes them, and against every
// fault a file can have.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "pens/ops/ir/error.h"
#include "pens/serialization/npy.h"
#include "tests/support/npy.h"

namespace test_npy {

using namespace pens;
using pens::testing::npy_bytes;
using pens::testing::raw_bytes;

std::string error_of(const std::string& bytes) {
  try {
    parse_npy(bytes, "a.npy");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("npy: every supported dtype reads as float32, row-major, with its shape") {
  const NpyArray f4 = parse_npy(npy_bytes("<f4", {2, 3}, raw_bytes(std::vector<float>{1, 2, 3, 4, 5, 6.5f})), "f4");
  CHECK(f4.shape == std::vector<int64_t>{2, 3});
  CHECK(f4.data == std::vector<float>{1, 2, 3, 4, 5, 6.5f});
  CHECK_FALSE(f4.integral);
  const NpyArray f8 = parse_npy(npy_bytes("<f8", {3}, raw_bytes(std::vector<double>{0.25, -2, 1e10})), "f8");
  CHECK(f8.shape == std::vector<int64_t>{3});
  CHECK(f8.data == std::vector<float>{0.25f, -2.0f, 1e10f});
  const NpyArray i8 = parse_npy(npy_bytes("<i8", {3}, raw_bytes(std::vector<int64_t>{-1, 0, 9})), "i8");
  CHECK(i8.data == std::vector<float>{-1, 0, 9});
  CHECK(i8.integral);
  const NpyArray i4 = parse_npy(npy_bytes("<i4", {2}, raw_bytes(std::vector<int32_t>{7, -3})), "i4");
  CHECK(i4.data == std::vector<float>{7, -3});
  const NpyArray i2 = parse_npy(npy_bytes("<i2", {1}, raw_bytes(std::vector<int16_t>{-300})), "i2");
  CHECK(i2.data == std::vector<float>{-300});
  const NpyArray u1 = parse_npy(npy_bytes("|u1", {2, 2}, raw_bytes(std::vector<uint8_t>{0, 255, 3, 4})), "u1");
  CHECK(u1.data == std::vector<float>{0, 255, 3, 4});
  const NpyArray b1 = parse_npy(npy_bytes("|b1", {2}, raw_bytes(std::vector<uint8_t>{0, 1})), "b1");
  CHECK(b1.data == std::vector<float>{0, 1});
  // A float array of whole numbers is integral (labels saved as floats).
  CHECK(parse_npy(npy_bytes("<f4", {2}, raw_bytes(std::vector<float>{2, 0})), "f").integral);
  // Empty and scalar arrays.
  CHECK(parse_npy(npy_bytes("<f4", {0, 5}, ""), "empty").data.empty());
  CHECK(parse_npy(npy_bytes("<f4", {}, raw_bytes(std::vector<float>{3})), "scalar").data == std::vector<float>{3});
}

TEST_CASE("npy: versions 2 and 3 (a four-byte header length) and double-quoted keys") {
  std::string v1 = npy_bytes("<f4", {2}, raw_bytes(std::vector<float>{1, 2}));
  const auto header_length = static_cast<size_t>(static_cast<uint8_t>(v1[8])) | static_cast<size_t>(static_cast<uint8_t>(v1[9])) << 8;
  for (const char version : {'\x02', '\x03'}) {
    std::string v = v1.substr(0, 6) + version + '\x00' + v1.substr(8, 2) + std::string(2, '\0') + v1.substr(10);
    CHECK(parse_npy(v, "v").data == std::vector<float>{1, 2});
  }
  std::string quoted = v1;
  for (size_t i = 10; i < 10 + header_length; ++i) quoted[i] = quoted[i] == '\'' ? '"' : quoted[i];
  CHECK(parse_npy(quoted, "q").shape == std::vector<int64_t>{2});
}

TEST_CASE("npy: every fault is an Error that names the file and what is wrong") {
  const std::string good = npy_bytes("<f4", {2, 2}, raw_bytes(std::vector<float>{1, 2, 3, 4}));
  CHECK(error_of("PK\x03\x04 a zip file") == "a.npy: not a .npy file (it does not start with \\x93NUMPY; numpy.save writes .npy files)");
  CHECK(error_of(good.substr(0, good.size() - 4)).find("a.npy: truncated: the header promises 16 bytes of data") == 0);
  CHECK(error_of(good + "xx").find("a.npy: trailing bytes") == 0);
  CHECK(error_of(good.substr(0, 40)).find("a.npy: truncated .npy header") == 0);
  std::string v9 = good;
  v9[6] = '\x09';
  CHECK(error_of(v9) == "a.npy: .npy format version 9 is not one of 1, 2, 3");
  CHECK(error_of(npy_bytes(">f4", {1}, std::string(4, '\0'))).find("a.npy: dtype >f4 is big-endian") == 0);
  CHECK(error_of(npy_bytes("<c8", {1}, std::string(8, '\0'))).find("a.npy: dtype <c8 is not supported") == 0);
  CHECK(error_of(npy_bytes("<f4", {2, 2}, raw_bytes(std::vector<float>{1, 2, 3, 4}), "True")) ==
        "a.npy: the array is in Fortran order; save numpy.ascontiguousarray(a)");
  CHECK(error_of(npy_bytes("<f4", {1000000000, 1000000000, 1000000}, "")).find("a.npy: the .npy shape promises more than") == 0);
  std::string structured = good;
  const size_t at = structured.find("'<f4'");
  structured.replace(at, 5, "[('a'");
  CHECK(error_of(structured).find("a.npy: the .npy dtype [('a'") == 0);
  std::string no_shape = good;
  no_shape.replace(no_shape.find("'shape'"), 7, "'shapf'");
  CHECK(error_of(no_shape).find("a.npy: the .npy header has no 'shape'") == 0);
  std::string bad_shape = good;
  bad_shape.replace(bad_shape.find("(2, 2)"), 6, "(2, x)");
  CHECK(error_of(bad_shape) == "a.npy: the .npy header's shape (2, x) is not a tuple of counts");
}

}  // namespace test_npy
