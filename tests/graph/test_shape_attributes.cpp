#include <doctest/doctest.h>

#include "pens/graph/graph.h"
#include "pens/ops/ir/attributes.h"
#include "pens/ops/ir/shape.h"
#include "pens/ops/registry.h"
#include "tests/support/helpers.h"

namespace test_shape_attributes {

using namespace pens;

TEST_CASE("shape: sizes, matrix view, axis blocks and batch binding") {
  const Shape s{2, 3, 4};
  CHECK(s.rank == 3);
  CHECK(s.numel() == 24);
  CHECK(s.cols() == 4);
  CHECK(s.rows() == 6);
  CHECK(s.outer(1) == 2);
  CHECK(s.inner(1) == 4);
  CHECK(Shape{}.numel() == 1);
  CHECK(Shape{}.str() == "[]");

  const Shape b{kBatch, 784};
  CHECK(b.has_batch());
  CHECK(b.str() == "[B,784]");
  CHECK(b.bind_batch(100) == Shape{100, 784});
  CHECK_FALSE(b.bind_batch(100).has_batch());

  CHECK_ERROR_MENTIONS(Shape({1, 2, 3, 4, 5}), "rank 5", "maximum rank 4");
  CHECK_ERROR_MENTIONS(Shape({3, -7}), "negative dimension -7");
}

TEST_CASE("attributes: typed reads and errors that name the attribute") {
  const Attributes a{{"p", 0.5},
                     {"axis", int64_t{1}},
                     {"init", std::string("normal")},
                     {"axes", std::vector<int64_t>{0, 2}}};
  CHECK(a.get_float("p") == 0.5);
  CHECK(a.get_int("axis") == 1);
  CHECK(a.get_float("axis") == 1.0);  // ints read as floats
  CHECK(a.get_string("init") == "normal");
  CHECK(a.get_ints("axes") == std::vector<int64_t>{0, 2});
  CHECK(a.get_floats("axes") == std::vector<double>{0.0, 2.0});
  CHECK(a.str() == "axes=[0,2], axis=1, init=normal, p=0.5");
  CHECK_ERROR_MENTIONS(a.get_int("missing"), "'missing'", "missing");
  CHECK_ERROR_MENTIONS(a.get_int("p"), "'p'", "should be an int", "float");
  CHECK_ERROR_MENTIONS(a.get_string("axis"), "'axis'", "string");
}

TEST_CASE("attributes are checked against the op's schema when a node is added") {
  Graph g;
  const NodeId x = g.input("x", {kBatch, 4});
  SUBCASE("defaults are filled in") {
    const NodeId d = g.add("dropout", {x}, {}, "drop");
    CHECK(g[d].attrs.get_float("p") == 0.5);
    CHECK(g[d].attrs.get_int("rescale") == 1);
  }
  SUBCASE("ints given for float attributes are stored as floats") {
    const NodeId s = g.add("scale", {x}, {{"factor", int64_t{2}}}, "twice");
    CHECK(std::holds_alternative<double>(*g[s].attrs.find("factor")));
  }
  SUBCASE("unknown attribute") {
    CHECK_ERROR_MENTIONS(g.add("relu", {x}, {{"alpha", 0.1}}, "act"), "node 'act'", "relu",
                         "unknown attribute 'alpha'");
  }
  SUBCASE("wrong type") {
    CHECK_ERROR_MENTIONS(g.add("dropout", {x}, {{"p", std::string("half")}}, "drop"),
                         "node 'drop'", "'p'", "should be float", "got string");
  }
  SUBCASE("missing required attribute") {
    CHECK_ERROR_MENTIONS(g.add("slice", {x}, {{"end", int64_t{2}}}, "cut"), "node 'cut'",
                         "missing required attribute 'begin'");
  }
}

}  // namespace test_shape_attributes
