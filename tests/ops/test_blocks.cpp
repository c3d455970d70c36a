// Kernels that cut a matrix into blocks of rows or columns for the pool (parallel_rows,
// parallel_columns in ops/parallel.h): on a matrix cut into several blocks, every value
// and gradient has the bits it has when its rows or columns are computed alone, in one
// call, on any number of threads. The gradient checks (test_gradients.cpp) verify the
// same kernels' maths on shapes that fit one call.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/graph/infer.h"
#include "pens/ops/parallel.h"

namespace test_blocks {

using namespace pens;

namespace {

// The op's output, then each input's gradient, with their shapes.
struct Result {
  std::vector<std::vector<float>> values;
  std::vector<Shape> shapes;
};

// Positive everywhere: normalize reads one input as a variance.
float input_value(const std::string& name, int64_t row, int64_t col) {
  const double salt = static_cast<double>(name[0]);
  return static_cast<float>(std::sin(0.37 * static_cast<double>(row) + 0.11 * static_cast<double>(col) + salt) + 1.5);
}

// Runs `op` on inputs of the given shapes, each element set by input_value from its
// position in the whole matrix (`row0`, `col0`: where this slice starts), then backward
// from the loss sum(w ⊙ op(...)), so that the op is handed the gradient w.
Result run(const std::string& op, const Attributes& attrs, const std::vector<Shape>& shapes, bool by_columns,
           int64_t row0, int64_t col0) {
  Graph g;
  std::vector<NodeId> in;
  const std::vector<std::string> names = {"a", "b", "c", "d", "e"};
  for (size_t i = 0; i < shapes.size(); ++i) in.push_back(g.input(names[i], shapes[i]));
  const NodeId y = g.add(op, in, attrs, "y");
  const Shape out = infer_values(g, 1)[y].shape;
  const NodeId w = g.input("w", out);
  g.set_flag(g.add("sum", {g.add("mul", {y, w}, {}, "wy")}, {}, "loss"), kLoss);
  ParamStore<float> params(g);
  Tape<float> tape(g, params, {.grad_inputs = true});
  const auto fill = [&](const std::string& name, const Shape& s) {
    auto v = tape.input(name);
    for (int64_t i = 0; i < v.size(); ++i) {
      int64_t r = 0, c = 0;
      if (s.rank == 2) {
        r = i / s[1], c = i % s[1];
      } else {
        (by_columns ? c : r) = i;
      }
      v[i] = input_value(name, row0 + r, col0 + c);
    }
  };
  for (size_t i = 0; i < shapes.size(); ++i) fill(names[i], shapes[i]);
  fill("w", out);
  tape.forward();
  tape.backward();
  Result r;
  const auto take = [&](TensorView<const float> v) {
    r.values.emplace_back(v.data, v.data + v.size());
    r.shapes.push_back(v.shape);
  };
  take(tape.value("y"));
  for (size_t i = 0; i < shapes.size(); ++i) take(tape.grad(names[i]));
  return r;
}

// A tensor of the test is a matrix (rank 2: element (r, c) is at row r, column c of the
// whole) or a vector: per feature (column c) when the op is sliced by columns, per row
// when it is sliced by rows. A slice keeps `count` of its columns, or of its rows.
Shape slice(Shape s, bool by_columns, int64_t count) {
  s[by_columns ? s.rank - 1 : 0] = count;
  return s;
}

// The whole op on `rows` × `cols` against its slices (of columns, or of rows): each slice's
// values must equal the whole's bits at the slice's place.
void check_blocks(const std::string& op, const std::vector<Shape>& whole_shapes, bool by_columns, int64_t rows,
                  int64_t cols, const Attributes& attrs = {}) {
  const std::string what = op + (by_columns ? " by columns" : " by rows");
  INFO(what);
  for (const int n : {1, 3}) {
    set_threads(n);
    const Result whole = run(op, attrs, whole_shapes, by_columns, 0, 0);
    const int64_t extent = by_columns ? cols : rows;
    const int64_t width = by_columns ? 16 : 1;  // slices that fit one range
    int64_t mismatches = 0;
    for (int64_t begin = 0; begin < extent; begin += width) {
      const int64_t count = std::min(width, extent - begin);
      std::vector<Shape> shapes;
      for (const Shape& s : whole_shapes) shapes.push_back(slice(s, by_columns, count));
      const Result part = run(op, attrs, shapes, by_columns, by_columns ? 0 : begin, by_columns ? begin : 0);
      for (size_t t = 0; t < part.values.size(); ++t) {
        const Shape& ps = part.shapes[t];
        const int64_t whole_cols = whole.shapes[t].rank == 2 ? whole.shapes[t][1] : 0;
        for (int64_t i = 0; i < ps.numel(); ++i) {
          int64_t at = begin + i;  // a vector
          if (ps.rank == 2) {
            const int64_t r = i / ps[1], c = i % ps[1];
            at = by_columns ? r * whole_cols + begin + c : (begin + r) * whole_cols + c;
          }
          if (part.values[t][static_cast<size_t>(i)] != whole.values[t][static_cast<size_t>(at)]) ++mismatches;
        }
      }
    }
    CHECK_MESSAGE(mismatches == 0, n << " threads: " << mismatches << " values differ from their slice's");
  }
}

struct KeepThreads {
  int saved = threads();
  ~KeepThreads() { set_threads(saved); }
};

// 200 × 300 is cut into 4 blocks of rows and 4 of columns (kElementwiseRange 16384).
constexpr int64_t kRows = 200, kCols = 300;
const Shape kMatrix{kRows, kCols};
const Shape kFeature{kCols};

}  // namespace

TEST_CASE("row-broadcast add, sub, mul: every value and gradient as its columns' alone") {
  KeepThreads keep;
  static_assert(kRows * kCols > 2 * kElementwiseRange);
  for (const char* op : {"add", "sub", "mul"}) {
    check_blocks(op, {kMatrix, kFeature}, true, kRows, kCols);
    check_blocks(op, {kFeature, kMatrix}, true, kRows, kCols);
    check_blocks(op, {kMatrix, Shape{1, kCols}}, true, kRows, kCols);
  }
}

TEST_CASE("batch statistics and normalisation: every value and gradient as its columns' alone") {
  KeepThreads keep;
  check_blocks("batch_variance", {kMatrix, kFeature}, true, kRows, kCols);
  check_blocks("normalize", {kMatrix, kFeature, kFeature, kFeature, kFeature}, true, kRows, kCols);
  check_blocks("l2_normalize_columns", {kMatrix}, true, kRows, kCols);
  check_blocks("mean", {kMatrix}, true, kRows, kCols, {{"axes", std::vector<int64_t>{0}}});
  check_blocks("sum", {kMatrix}, true, kRows, kCols, {{"axes", std::vector<int64_t>{0}}});
}

TEST_CASE("squared error per row: every value and gradient as its rows' alone") {
  KeepThreads keep;
  check_blocks("squared_error", {kMatrix, kMatrix}, false, kRows, kCols);
}

}  // namespace test_blocks
