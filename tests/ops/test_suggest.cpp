// "Did you mean": the nearest names to one that was not found (ops/ir/suggest.h).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "pens/ops/ir/suggest.h"

namespace test_suggest {

using pens::closest_names;
using pens::unknown_name_hint;
using Names = std::vector<std::string>;

TEST_CASE("the nearest names: a letter wrong, missing, extra or swapped, case ignored") {
  const Names kinds = {"adversarial", "fuzz", "gaussian", "mask", "subspace"};
  CHECK(closest_names("gausian", kinds) == Names{"gaussian"});   // one missing
  CHECK(closest_names("gaussain", kinds) == Names{"gaussian"});  // two swapped
  CHECK(closest_names("Mask", kinds) == Names{"mask"});          // case
  CHECK(closest_names("masc", kinds) == Names{"mask"});          // one wrong
  CHECK(closest_names("dropout", kinds).empty());                // nothing near
  const Names nodes = {"x", "h1", "h2", "logits", "loss"};
  CHECK(closest_names("logit", nodes) == Names{"logits"});
  CHECK(closest_names("h3", nodes) == Names{"h1", "h2"});  // ties in the choices' order
  CHECK(closest_names("h2", Names{"W2", "b2", "h1"}) == Names{"h1", "W2", "b2"});  // the shared prefix first
  CHECK(closest_names("childs", Names{"children", "pairing", "loss_on"}) == Names{"children"});  // a long prefix
  // Within 2 edits for names of 5 to 8 letters, 3 beyond; a name inside another counts.
  const Names fields = {"learning_rate", "momentum_start", "kind", "eval", "epsilon"};
  CHECK(closest_names("learning_rte", fields) == Names{"learning_rate"});
  CHECK(closest_names("lerning_rat", fields) == Names{"learning_rate"});
  CHECK(closest_names("evaluation", fields) == Names{"eval"});
  CHECK(closest_names("eps", fields) == Names{"epsilon"});
  CHECK(closest_names("kind", fields).empty());  // the name itself is not a suggestion
  CHECK(closest_names("", fields).empty());
  CHECK(closest_names(std::string(100000, 'x'), fields).empty());  // no quadratic work on a huge name
  // At most three, nearest first.
  CHECK(closest_names("ab", Names{"abc", "abd", "abe", "abf", "a"}) == Names{"abc", "abd", "abe"});
}

TEST_CASE("the hint lists the choices when there are few, and the nearest when there is one") {
  const Names kinds = {"fuzz", "gaussian", "mask"};
  CHECK(unknown_name_hint("gausian", kinds, "registered") == " (did you mean 'gaussian'? registered: fuzz, gaussian, mask)");
  CHECK(unknown_name_hint("dropout", kinds, "registered") == " (registered: fuzz, gaussian, mask)");
  CHECK(unknown_name_hint("gausian", kinds, "", 0) == " (did you mean 'gaussian'?)");
  CHECK(unknown_name_hint("dropout", kinds, "", 0).empty());
  CHECK(unknown_name_hint("h3", Names{"h1", "h2"}, "nodes", 0) == " (did you mean 'h1' or 'h2'?)");
  CHECK(unknown_name_hint("x", Names{}, "choices").empty());
}

}  // namespace test_suggest
