#include "pens/ops/ir/shape.h"

#include "pens/ops/ir/error.h"

namespace pens {

Shape::Shape(std::initializer_list<int64_t> d) : Shape(Shape::from({d.begin(), d.size()})) {}

Shape Shape::from(std::span<const int64_t> d) {
  if (d.size() > static_cast<size_t>(kMaxRank)) {
    fail("shape of rank ", d.size(), " exceeds the maximum rank ", kMaxRank);
  }
  Shape s;
  s.rank = static_cast<int>(d.size());
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i] < 0 && d[i] != kBatch) fail("negative dimension ", d[i], " in a shape");
    s.dims[i] = d[i];
  }
  return s;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= dims[static_cast<size_t>(i)];
  return n;
}

int64_t Shape::outer(int axis) const {
  int64_t n = 1;
  for (int i = 0; i < axis; ++i) n *= (*this)[i];
  return n;
}

int64_t Shape::inner(int axis) const {
  int64_t n = 1;
  for (int i = axis + 1; i < rank; ++i) n *= (*this)[i];
  return n;
}

bool Shape::has_batch() const {
  for (int i = 0; i < rank; ++i) {
    if ((*this)[i] == kBatch) return true;
  }
  return false;
}

Shape Shape::bind_batch(int64_t batch) const {
  Shape s = *this;
  for (int i = 0; i < rank; ++i) {
    if (s[i] == kBatch) s[i] = batch;
  }
  return s;
}

std::vector<int64_t> Shape::to_vector() const {
  return {dims.begin(), dims.begin() + rank};
}

std::string Shape::str() const {
  std::string out = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) out += ",";
    out += (*this)[i] == kBatch ? std::string("B") : std::to_string((*this)[i]);
  }
  return out + "]";
}

bool Shape::operator==(const Shape& o) const {
  if (rank != o.rank) return false;
  for (int i = 0; i < rank; ++i) {
    if ((*this)[i] != o[i]) return false;
  }
  return true;
}

}  // namespace pens
