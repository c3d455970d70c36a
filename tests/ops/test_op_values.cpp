// Values of ops on inputs small enough to work out by hand, and the errors bad shapes
// and bad data raise.
#include <doctest/doctest.h>

#include <cmath>

#include "pens/autodiff/tape.h"
#include "pens/graph/infer.h"
#include "pens/ops/registry.h"
#include "tests/support/eval.h"
#include "tests/support/helpers.h"

namespace test_op_values {

using namespace pens;
using pens::testing::evaluate;

namespace {
void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol));
  }
}
}  // namespace

TEST_CASE("broadcasting binary ops") {
  Graph g;
  const NodeId a = g.input("a", {2, 3});
  const NodeId row = g.input("row", {3});
  const NodeId col = g.input("col", {2, 1});
  g.add("add", {a, row}, {}, "a_plus_row");
  g.add("sub", {a, col}, {}, "a_minus_col");
  g.add("mul", {col, row}, {}, "outer");
  const testing::Values v{{"a", {1, 2, 3, 4, 5, 6}}, {"row", {10, 20, 30}}, {"col", {1, 2}}};
  check_close(evaluate(g, v, "a_plus_row"), {11, 22, 33, 14, 25, 36});
  check_close(evaluate(g, v, "a_minus_col"), {0, 1, 2, 2, 3, 4});
  check_close(evaluate(g, v, "outer"), {10, 20, 30, 20, 40, 60});
}

TEST_CASE("abs") {
  Graph g;
  g.add("abs", {g.input("a", {4})}, {}, "r");
  check_close(evaluate(g, {{"a", {-2, -0.5, 0, 3}}}, "r"), {2, 0.5, 0, 3});
}

TEST_CASE("reductions over axes") {
  Graph g;
  const NodeId x = g.input("x", {2, 3});
  g.add("sum", {x}, {}, "all");
  g.add("sum", {x}, {{"axes", std::vector<int64_t>{-1}}}, "rows");
  g.add("mean", {x}, {{"axes", std::vector<int64_t>{0}}}, "cols");
  const NodeId keep = g.add("sum", {x}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}}, "keep");
  const testing::Values v{{"x", {1, 2, 3, 4, 5, 6}}};
  check_close(evaluate(g, v, "all"), {21});
  check_close(evaluate(g, v, "rows"), {6, 15});
  check_close(evaluate(g, v, "cols"), {2.5, 3.5, 4.5});
  CHECK(infer_values(g, 1)[keep].shape == Shape{2, 1});
  Graph bad;
  bad.add("sum", {bad.input("x", {2, 3})}, {{"axes", std::vector<int64_t>{2}}}, "s");
  CHECK_ERROR_MENTIONS(verify(bad), "node 's'", "axis 2 is out of range");
}

TEST_CASE("softmax, log_softmax, l2_normalize and the losses on known values") {
  Graph g;
  const NodeId z = g.input("z", {2, 3});
  const NodeId y = g.input("y", {2}, DType::Index);
  g.add("softmax", {z}, {}, "p");
  g.add("log_softmax", {z}, {}, "logp");
  g.add("l2_normalize", {z}, {{"eps", 0.0}}, "unit");
  g.add("softmax_xent", {z, y}, {}, "xent");
  g.add("squared_hinge", {z, y}, {}, "hinge");
  g.add("squared_error", {z, g.input("t", {2, 3})}, {}, "se");
  // The second row is the first plus 1000: softmax must not overflow.
  const testing::Values v{{"z", {1, 2, 3, 1001, 1002, 1003}}, {"y", {2, 0}}, {"t", {0, 0, 0, 1, 1, 1}}};
  const double e = std::exp(1.0), total = 1 + e + e * e;
  const std::vector<double> p{1 / total, e / total, e * e / total};
  check_close(evaluate(g, v, "p"), {p[0], p[1], p[2], p[0], p[1], p[2]}, 1e-12);
  const auto logp = evaluate(g, v, "logp");
  for (size_t i = 0; i < 6; ++i) CHECK(logp[i] == doctest::Approx(std::log(p[i % 3])).epsilon(1e-12));
  const double n0 = std::sqrt(14.0);
  const std::vector<double> unit = evaluate(g, v, "unit");
  check_close({unit.begin(), unit.begin() + 3}, {1 / n0, 2 / n0, 3 / n0});
  check_close(evaluate(g, v, "xent"), {-std::log(p[2]), -std::log(p[0])}, 1e-9);
  // Row 0, label 2: slack for c=0 is 1+1=2, c=1: 1+2=3, c=2: max(0, 1-3)=0 -> 4+9.
  // Row 1, label 0: c=0: max(0, 1-1001)=0, c=1: 1003, c=2: 1004.
  check_close(evaluate(g, v, "hinge"), {13, 1003.0 * 1003 + 1004.0 * 1004});
  check_close(evaluate(g, v, "se"), {14, 1000.0 * 1000 + 1001.0 * 1001 + 1002.0 * 1002});
}

TEST_CASE("concat, slice, gather, embedding move the right elements") {
  Graph g;
  const NodeId a = g.input("a", {2, 2});
  const NodeId b = g.input("b", {2, 1});
  const NodeId joined = g.add("concat", {a, b}, {}, "joined");
  g.add("concat", {a, g.input("c", {1, 2})}, {{"axis", int64_t{0}}}, "stacked");
  g.add("slice", {joined}, {{"begin", int64_t{1}}, {"end", int64_t{3}}}, "cut");
  const NodeId idx = g.input("idx", {3}, DType::Index);
  g.add("gather", {joined, idx}, {{"axis", int64_t{1}}}, "cols");
  g.add("embedding", {g.input("table", {3, 2}), idx}, {}, "emb");
  const testing::Values v{{"a", {1, 2, 3, 4}}, {"b", {5, 6}}, {"c", {7, 8}}, {"idx", {2, 0, 2}},
                          {"table", {10, 11, 20, 21, 30, 31}}};
  check_close(evaluate(g, v, "joined"), {1, 2, 5, 3, 4, 6});
  check_close(evaluate(g, v, "stacked"), {1, 2, 3, 4, 7, 8});
  check_close(evaluate(g, v, "cut"), {2, 5, 4, 6});
  check_close(evaluate(g, v, "cols"), {5, 1, 5, 6, 3, 6});
  check_close(evaluate(g, v, "emb"), {30, 31, 10, 11, 30, 31});
}

TEST_CASE("gather_axes picks the same entries along every listed axis, in one pass") {
  Graph g;
  const NodeId cube = g.input("cube", {3, 3, 3});
  const NodeId idx = g.input("idx", {2}, DType::Index);
  g.add("gather_axes", {cube, idx}, {{"axes", std::vector<int64_t>{0, 1, 2}}}, "all");
  g.add("gather_axes", {cube, idx}, {{"axes", std::vector<int64_t>{0, -1}}}, "outer");
  std::vector<double> values(27);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i);  // cube[a][b][c] = 9a + 3b + c
  const testing::Values v{{"cube", values}, {"idx", {2, 0}}};
  check_close(evaluate(g, v, "all"), {26, 24, 20, 18, 8, 6, 2, 0});
  // Axis 1 untouched: [idx] x [0, 1, 2] x [idx].
  check_close(evaluate(g, v, "outer"), {20, 18, 23, 21, 26, 24, 2, 0, 5, 3, 8, 6});

  for (const auto& [axes, what] : {std::pair{std::vector<int64_t>{1, -1}, "axis -1 is listed twice"},
                                    std::pair{std::vector<int64_t>{2}, "axis 2 is out of range for rank 2"}}) {
    Graph bad;
    bad.add("gather_axes", {bad.input("a", {2, 3}), bad.input("i", {2}, DType::Index)}, {{"axes", axes}}, "bad");
    CHECK_ERROR_MENTIONS(verify(bad), "node 'bad'", what);
  }
  Graph small;
  small.add("gather_axes", {small.input("a", {2, 3}), small.input("i", {2}, DType::Index)},
            {{"axes", std::vector<int64_t>{0, 1}}}, "picked");
  // Index 2 fits axis 1 (3) but not axis 0 (2).
  CHECK_THROWS_WITH(evaluate(small, {{"a", {1, 2, 3, 4, 5, 6}}, {"i", {0, 2}}}, "picked"),
                    doctest::Contains("index 2 is out of range [0, 2)"));

  // An innermost axis wider than the offsets the kernel lists once (512), not gathered
  // ("row": row 1, 600 times) and gathered ("columns": each row's columns reversed).
  Graph wide;
  const NodeId rows = wide.input("rows", {2, 600});
  wide.add("gather_axes", {rows, wide.input("row_ids", {600}, DType::Index)}, {{"axes", std::vector<int64_t>{0}}},
           "row");
  wide.add("gather_axes", {rows, wide.input("column_ids", {600}, DType::Index)},
           {{"axes", std::vector<int64_t>{1}}}, "columns");
  std::vector<double> values2(1200), reversed, repeated, flipped;
  for (size_t i = 0; i < values2.size(); ++i) values2[i] = static_cast<double>(i);
  for (size_t j = 0; j < 600; ++j) reversed.push_back(static_cast<double>(599 - j));
  for (size_t k = 0; k < 600; ++k) repeated.insert(repeated.end(), values2.begin() + 600, values2.end());
  for (size_t r = 0; r < 2; ++r) {
    for (size_t j = 0; j < 600; ++j) flipped.push_back(values2[r * 600 + 599 - j]);
  }
  const testing::Values in{{"rows", values2}, {"row_ids", std::vector<double>(600, 1)}, {"column_ids", reversed}};
  check_close(evaluate(wide, in, "row"), repeated);
  check_close(evaluate(wide, in, "columns"), flipped);
}

TEST_CASE("bilinear matches the sum it stands for, in both of its forms") {
  // Over the rows' outer products, unpacked (2 rows) and packed (12); a product per
  // slice (40).
  for (const int rows : {2, 12, 40}) {
    CAPTURE(rows);
    Graph g;
    g.add("bilinear", {g.input("v1", {rows, 2}), g.input("T", {3, 2, 2}), g.input("v2", {rows, 2})}, {}, "t");
    std::vector<double> v1, v2, t(12);
    for (int i = 0; i < 2 * rows; ++i) {
      v1.push_back(std::sin(1.0 + i));
      v2.push_back(std::cos(2.0 * i));
    }
    for (size_t i = 0; i < t.size(); ++i) t[i] = 0.1 * static_cast<double>(i) - 0.4;
    std::vector<double> want;
    for (int b = 0; b < rows; ++b) {
      for (int k = 0; k < 3; ++k) {
        double s = 0;
        for (int i = 0; i < 2; ++i) {
          for (int j = 0; j < 2; ++j) s += v1[b * 2 + i] * t[k * 4 + i * 2 + j] * v2[b * 2 + j];
        }
        want.push_back(s);
      }
    }
    check_close(evaluate(g, {{"v1", v1}, {"T", t}, {"v2", v2}}, "t"), want);
  }
}

TEST_CASE("attributes outside their range are refused when the node is added, naming node and range") {
  Graph g;
  const NodeId x = g.input("x", {2, 3});
  CHECK_ERROR_MENTIONS(g.add("dropout", {x}, {{"p", 1.0}}, "bad"), "node 'bad'", "attribute 'p' must be in [0, 1), got 1");
  CHECK_ERROR_MENTIONS(g.add("dropout", {x}, {{"p", -0.5}}, "bad"), "node 'bad'", "in [0, 1)");
  CHECK_ERROR_MENTIONS(g.add("dropout", {x}, {{"p", std::nan("")}}, "bad"), "node 'bad'", "got nan");
  CHECK_ERROR_MENTIONS(g.add("gaussian_noise", {x}, {{"sigma", -1.0}}, "bad"), "attribute 'sigma' must be >= 0");
  CHECK_ERROR_MENTIONS(g.param("W", {3, 3}, {{"init", std::string("normal")}, {"std", -0.1}}), "'std' must be >= 0");
  CHECK_ERROR_MENTIONS(g.param("V", {3, 3}, {{"max_norm", 0.0}}), "'max_norm' must be > 0");
  CHECK(g.size() == 1);  // nothing refused was added
  g.add("dropout", {x}, {{"p", 0.0}}, "edge");  // the closed end is in
}

TEST_CASE("bad shapes raise errors that name the node and the shapes") {
  auto fails = [](auto build, const char* what) {
    Graph g;
    build(g);
    CHECK_ERROR_MENTIONS(verify(g), "node 'bad'", what);
  };
  fails([](Graph& g) { g.add("matmul", {g.input("a", {2, 3}), g.input("b", {4, 5})}, {}, "bad"); },
        "inner dimensions differ");
  fails([](Graph& g) { g.add("matmul", {g.input("a", {2, 3, 1}), g.input("b", {3, 5})}, {}, "bad"); },
        "rank 2");
  fails([](Graph& g) {
          g.add("affine", {g.input("x", {2, 3}), g.input("W", {3, 4}), g.input("b", {5})}, {}, "bad");
        },
        "[5]");
  fails([](Graph& g) { g.add("concat", {g.input("a", {2, 3}), g.input("b", {3, 3})}, {}, "bad"); },
        "does not fit");
  fails([](Graph& g) {
          g.add("slice", {g.input("a", {2, 3})}, {{"begin", int64_t{2}}, {"end", int64_t{5}}}, "bad");
        },
        "does not fit axis");
  fails([](Graph& g) { g.add("gather", {g.input("a", {2, 3}), g.input("i", {2})}, {}, "bad"); },
        "indices");
  fails([](Graph& g) {
          g.add("bilinear", {g.input("a", {2, 3}), g.input("T", {4, 3, 2}), g.input("b", {2, 3})}, {}, "bad");
        },
        "T is [4,3,2]");
  fails([](Graph& g) {
          g.add("softmax_xent", {g.input("s", {4, 3}), g.input("y", {5}, DType::Index)}, {}, "bad");
        },
        "labels are [5]");
  fails([](Graph& g) { g.add("squared_error", {g.input("a", {2, 3}), g.input("b", {3, 2})}, {}, "bad"); },
        "[3,2]");
  fails([](Graph& g) { g.add("softmax", {g.input("s", {})}, {}, "bad"); }, "at least one axis");
  fails([](Graph& g) {
          g.add("constant", {}, {{"shape", std::vector<int64_t>{2}}, {"values", std::vector<double>{1, 2, 3}}}, "bad");
        },
        "'values' has 3 elements");
  fails([](Graph& g) { g.add("input", {}, {{"shape", std::vector<int64_t>{0, 3}}}, "bad"); },
        "must be at least 1");
}

TEST_CASE("bad data at run time: labels and indices out of range name the node") {
  Graph loss;
  loss.add("softmax_xent", {loss.input("s", {2, 3}), loss.input("y", {2}, DType::Index)}, {}, "xent");
  Graph pick;
  pick.add("gather", {pick.input("s", {2, 3}), pick.input("y", {2}, DType::Index)},
           {{"axis", int64_t{1}}}, "pick");
  const std::vector<double> zeros(6, 0.0);
  const testing::Values label_too_big{{"s", zeros}, {"y", {1, 3}}};
  const testing::Values negative{{"s", zeros}, {"y", {-1, 0}}};
  const testing::Values fractional{{"s", zeros}, {"y", {0.5, 0}}};
  CHECK_ERROR_MENTIONS(evaluate(loss, label_too_big, "xent"), "node 'xent'", "label 3 of row 1", "[0, 3)");
  CHECK_ERROR_MENTIONS(evaluate(loss, fractional, "xent"), "label 0.5", "not a class");
  CHECK_ERROR_MENTIONS(evaluate(pick, negative, "pick"), "node 'pick'", "index -1 is out of range");
}

TEST_CASE("constants hold their listed or repeated value") {
  Graph g;
  g.add("constant", {}, {{"shape", std::vector<int64_t>{2, 2}}, {"values", std::vector<double>{1, -2, 0.5, 3}}}, "c");
  g.add("constant", {}, {{"shape", std::vector<int64_t>{kBatch, 2}}, {"value", 0.25}}, "fill");
  check_close(evaluate(g, {}, "c"), {1, -2, 0.5, 3});
  check_close(evaluate(g, {}, "fill", 3), {0.25, 0.25, 0.25, 0.25, 0.25, 0.25});
}

TEST_CASE("stop_gradient passes values forward and no gradient back") {
  // objective = sum(stop_gradient(w) * w): d/dw = w through the second factor alone, not 2w.
  Graph g;
  const NodeId w = g.param("w", {3}, {{"init", std::string("constant")}, {"value", 0.0}});
  const NodeId target = g.add("stop_gradient", {w}, {}, "target");
  g.set_flag(g.add("sum", {g.add("mul", {target, w})}, {}, "objective"), kLoss);
  ParamStore<double> params(g);
  const std::vector<double> values{1.0, -2.0, 3.5};
  std::copy(values.begin(), values.end(), params.value("w").data);
  Tape<double> tape(g, params);
  tape.forward();
  CHECK(tape.objective() == doctest::Approx(1.0 + 4.0 + 12.25));
  for (int i = 0; i < 3; ++i) CHECK(tape.value("target")[i] == values[static_cast<size_t>(i)]);
  tape.backward();
  for (int i = 0; i < 3; ++i) CHECK(params.grad("w")[i] == values[static_cast<size_t>(i)]);
  CHECK_FALSE(tape.grad("target"));  // nothing upstream of it needs a gradient through it
}

TEST_CASE("pseudo_label: the argmax class of confident rows, zero rows elsewhere, no gradient back") {
  // Row maxima of softmax: [3, 0, 0] 0.91; [0.1, 0, 0.2] 0.36; [1, 1, 0] 0.42 (a tie).
  const std::vector<double> logits{3, 0, 0, 0.1, 0, 0.2, 1, 1, 0};
  const auto labels = [&](double threshold) {
    Graph g;
    const NodeId w = g.param("w", {3, 3}, {{"init", std::string("constant")}, {"value", 0.0}});
    const NodeId label = g.add("pseudo_label", {w}, {{"threshold", threshold}}, "label");
    g.set_flag(g.add("sum", {g.add("mul", {label, w})}, {}, "objective"), kLoss);
    ParamStore<double> params(g);
    std::copy(logits.begin(), logits.end(), params.value("w").data);
    Tape<double> tape(g, params);
    tape.forward();
    tape.backward();
    const auto value = tape.value("label");
    // d objective / dw = the label itself: nothing flows through pseudo_label.
    for (int i = 0; i < 9; ++i) CHECK(params.grad("w")[i] == value[i]);
    return std::vector<double>(value.data, value.data + 9);
  };
  CHECK(labels(0.5) == std::vector<double>{1, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(labels(0.4) == std::vector<double>{1, 0, 0, 0, 0, 0, 1, 0, 0});  // the first of a tie
  CHECK(labels(0.0) == std::vector<double>{1, 0, 0, 0, 0, 1, 1, 0, 0});
  CHECK(labels(0.95) == std::vector<double>(9, 0.0));
}

}  // namespace test_op_values
