#include "ops/check_case.h"

#include <cmath>

#include "graph/error.h"
#include "ops/op.h"

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

NodeId CheckBuilder::real(Shape shape, const Sampler& sampler) {
  const std::string name = cat("x", current_.graph.size());
  NodeId v = current_.graph.param(name, shape);
  std::vector<double>& vals = current_.values[name];
  for (int64_t i = 0; i < shape.numel(); ++i) vals.push_back(draw(sampler));
  return v;
}

NodeId CheckBuilder::index_values(const std::vector<int64_t>& values) {
  std::vector<double> as_real(values.begin(), values.end());
  return current_.graph.add("constant", {},
                            {{"shape", std::vector<int64_t>{static_cast<int64_t>(values.size())}},
                             {"dtype", std::string("index")},
                             {"values", as_real}},
                            cat("i", current_.graph.size()));
}

NodeId CheckBuilder::index(Shape shape, int64_t bound) {
  if (shape.rank != 1) fail("check cases take rank-1 index inputs");
  std::vector<int64_t> values;
  for (int64_t i = 0; i < shape.numel(); ++i) {
    values.push_back(static_cast<int64_t>(unit(rng_) * static_cast<double>(bound)));
  }
  return index_values(values);
}

void CheckBuilder::check(const std::vector<NodeId>& inputs, Attributes attrs,
                         std::string label) {
  NodeId v = current_.graph.add(op_.name, inputs, std::move(attrs), "out");
  current_.graph.set_flag(v, kOutput);
  if (op_.leaf && op_.name != "constant") {
    // The leaf itself is the variable: give it values.
    const Shape shape = Shape::from(current_.graph[v].attrs.get_ints("shape"));
    std::vector<double>& vals = current_.values["out"];
    for (int64_t i = 0; i < shape.numel(); ++i) vals.push_back(draw(uniform(-1, 1)));
  }
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
