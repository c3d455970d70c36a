#include "pens/ops/check_case.h"

#include <cmath>

#include "pens/ops/ir/error.h"
#include "pens/ops/op.h"

namespace pens {

namespace {
// A uniform double in [0, 1) from 53 random bits; std::uniform_real_distribution is
// not the same on every standard library, this is.
double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }
}  // namespace

Sampler uniform(double lo, double hi) {
  return [lo, hi](std::mt19937_64& rng) { return lo + (hi - lo) * unit(rng); };
}

Sampler away_from(double lo, double hi, std::vector<double> kinks, double margin) {
  return [=](std::mt19937_64& rng) {
    for (;;) {
      double x = lo + (hi - lo) * unit(rng);
      bool near = false;
      for (double k : kinks) near = near || std::abs(x - k) < margin;
      if (!near) return x;
    }
  };
}

CheckBuilder::CheckBuilder(const OpDef& op, uint64_t seed) : op_(op), rng_(seed) {}

CheckBuilder::Arg CheckBuilder::real(Shape shape, const Sampler& sampler) {
  CheckInput in{shape, DType::Real, {}};
  for (int64_t i = 0; i < shape.numel(); ++i) in.values.push_back(draw(sampler));
  current_.inputs.push_back(std::move(in));
  return current_.inputs.size() - 1;
}

CheckBuilder::Arg CheckBuilder::index_values(const std::vector<int64_t>& values) {
  current_.inputs.push_back(
      {Shape{static_cast<int64_t>(values.size())}, DType::Index, std::vector<double>(values.begin(), values.end())});
  return current_.inputs.size() - 1;
}

CheckBuilder::Arg CheckBuilder::index(Shape shape, int64_t bound) {
  if (shape.rank != 1) fail("check cases take rank-1 index inputs");
  std::vector<int64_t> values;
  for (int64_t i = 0; i < shape.numel(); ++i) {
    values.push_back(static_cast<int64_t>(unit(rng_) * static_cast<double>(bound)));
  }
  return index_values(values);
}

void CheckBuilder::check(const std::vector<Arg>& args, Attributes attrs, std::string label) {
  for (Arg a : args) {
    if (a >= current_.inputs.size()) fail("op '", op_.name, "': a check case names an input of another case");
  }
  current_.args = args;
  if (op_.leaf && op_.name != "constant") {
    // The leaf itself is the variable: give it values.
    if (!attrs.has("shape")) fail("op '", op_.name, "': a leaf's check case needs a shape");
    const Shape shape = Shape::from(attrs.get_ints("shape"));
    for (int64_t i = 0; i < shape.numel(); ++i) current_.leaf_values.push_back(draw(uniform(-1, 1)));
  }
  current_.attrs = std::move(attrs);
  current_.label = label.empty() ? op_.name : cat(op_.name, "[", label, "]");
  done_.push_back(std::move(current_));
  current_ = CheckCase{};
}

std::vector<CheckCase> check_cases(const OpDef& op, uint64_t seed) {
  CheckBuilder b(op, seed ^ hash_name(op.name));
  op.check(b);
  return b.take();
}

}  // namespace pens
