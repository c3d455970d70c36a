// The built-in model families build what their builders build, from settings checked
// against their schemas.
#include <doctest/doctest.h>

#include "pens/models/ctn.h"
#include "pens/models/family.h"
#include "pens/models/ladder.h"
#include "pens/models/mlp.h"
#include "pens/ops/ir/error.h"
#include "pens/serialization/model_file.h"

namespace test_family {

using namespace pens;

std::string text_of(const Model& m) { return write_model(m, ValueStorage::None, "").json; }

TEST_CASE("the built-in families build what their builders build") {
  Model mlp;
  mlp.graph = build_mlp({.layers = {6, 5, 3}, .weight_std = 0.2, .mask_input = 0.2, .mask_hidden = 0.5});
  CHECK(text_of(build_model("mlp", {{"layers", std::vector<int64_t>{6, 5, 3}}, {"weight_std", 0.2},
                                    {"mask_input", 0.2}, {"mask_hidden", 0.5}})) == text_of(mlp));
  CHECK(text_of(build_model("ctn", {{"vocabulary", int64_t{11}}, {"dim", int64_t{4}}, {"fuzz", 0.02}, {"subspace", int64_t{2}}})) ==
        text_of(build_ctn({.vocabulary = 11, .dim = 4, .fuzz = 0.02, .subspace = 2})));
  CHECK(text_of(build_model("ladder", {{"layers", std::vector<int64_t>{6, 4, 3}},
                                       {"denoising", std::vector<double>{10, 1, 0.1}}})) ==
        text_of(build_ladder({.layers = {6, 4, 3}, .denoising = {10, 1, 0.1}})));
}

TEST_CASE("a family's settings are checked against its schema") {
  CHECK_THROWS_WITH_AS(build_model("ctn", {}), doctest::Contains("vocabulary"), Error);
  CHECK_THROWS_WITH_AS(build_model("mlp", {{"mask_hiden", 0.5}}), doctest::Contains("mask_hiden"), Error);
  CHECK_THROWS_WITH_AS(build_model("mlp", {{"mask_hidden", 1.5}}), doctest::Contains("mask_hidden"), Error);
  CHECK_THROWS_WITH_AS(build_model("ctm", {}), doctest::Contains("did you mean 'ctn'"), Error);
}

}  // namespace test_family
