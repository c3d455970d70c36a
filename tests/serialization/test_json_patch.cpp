// Editing JSON by add / replace / remove at a JSON pointer, as a config's model_patch edits
// its model file: what each operation does, and errors that name the operation and path.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "pens/ops/ir/error.h"
#include "pens/serialization/json_patch.h"
#include "tests/support/helpers.h"

namespace test_json_patch {

using namespace pens;
using nlohmann::json;

namespace {

const json kDoc = json::parse(R"({"inputs": [{"name": "x", "noise": [{"kind": "adversarial", "eps": 1.0}]}],
                                  "pseudo_ensemble": {"penalties": [{"kind": "kl"}]}, "a/b": {"~": 1}})");

json patched(const std::string& ops) { return apply_json_patch(kDoc, json::parse(ops), "model_patch"); }

}  // namespace

TEST_CASE("a JSON patch replaces, adds (appending with '-' or inserting at an index) and removes") {
  CHECK(patched(R"([{"op": "replace", "path": "/inputs/0/noise/0/eps", "value": 1.5}])")["inputs"][0]["noise"][0]["eps"] ==
        1.5);
  const json added = patched(R"([{"op": "add", "path": "/pseudo_ensemble/penalties/-", "value": {"kind": "entropy"}},
                                 {"op": "add", "path": "/pseudo_ensemble/penalties/0", "value": {"kind": "l2"}}])");
  CHECK(added["pseudo_ensemble"]["penalties"] == json::parse(R"([{"kind": "l2"}, {"kind": "kl"}, {"kind": "entropy"}])"));
  // "add" on an object member creates it, or replaces it when it is there.
  CHECK(patched(R"([{"op": "add", "path": "/inputs/0/noise/0/xi", "value": 10}])")["inputs"][0]["noise"][0]["xi"] == 10);
  CHECK(patched(R"([{"op": "add", "path": "/inputs/0/name", "value": "z"}])")["inputs"][0]["name"] == "z");
  const json removed = patched(R"([{"op": "remove", "path": "/pseudo_ensemble/penalties/0"},
                                   {"op": "remove", "path": "/inputs/0/noise/0/eps"}])");
  CHECK(removed["pseudo_ensemble"]["penalties"].empty());
  CHECK_FALSE(removed["inputs"][0]["noise"][0].contains("eps"));
  // Operations apply in turn; ~1 and ~0 in a token stand for '/' and '~'.
  CHECK(patched(R"([{"op": "replace", "path": "/a~1b/~0", "value": 2}])")["a/b"]["~"] == 2);
  CHECK(patched(R"([{"op": "add", "path": "/extra", "value": []}, {"op": "add", "path": "/extra/-", "value": 3}])")["extra"] ==
        json::array({3}));
  CHECK(patched(R"([])") == kDoc);
}

TEST_CASE("a JSON patch's errors name the operation, the path and what the document holds there") {
  CHECK_ERROR_MENTIONS(patched(R"({"op": "add"})"), "model_patch must be an array of operations, not an object");
  CHECK_ERROR_MENTIONS(patched(R"([{"op": "replace", "path": "/inputs/0/noise/0/eps", "value": 2}, 3])"),
                       "model_patch[1] must be an object");
  CHECK_ERROR_MENTIONS(patched(R"([{"op": "move", "path": "/a", "from": "/b"}])"), "model_patch[0]", "unknown field \"from\"");
  CHECK_ERROR_MENTIONS(patched(R"([{"op": "copy", "path": "/a"}])"), "model_patch[0]", "op \"copy\" is not one pens applies");
  CHECK_ERROR_MENTIONS(patched(R"([{"path": "/a"}])"), "model_patch[0]", "\"op\" must be");
  CHECK_ERROR_MENTIONS(patched(R"([{"op": "replace", "path": "/inputs/0/name"}])"), "op \"replace\" needs a \"value\"");
  CHECK_ERROR_MENTIONS(patched(R"([{"op": "remove", "path": "/inputs", "value": 1}])"), "op \"remove\" takes no \"value\"");
  CHECK_ERROR_MENTIONS(patched(R"([{"op": "replace", "path": "inputs", "value": 1}])"), "path \"inputs\" is not a JSON pointer");
  CHECK_ERROR_MENTIONS(patched(R"([{"op": "replace", "path": "", "value": 1}])"), "is not a JSON pointer");
  CHECK_ERROR_MENTIONS(patched(R"([{"op": "replace", "path": "/a~2", "value": 1}])"), "'~' must be followed by 0");
  CHECK_ERROR_MENTIONS(patched(R"([{"op": "replace", "path": "/inputs/0/noise/3/eps", "value": 1}])"), "model_patch[0]",
                       "/inputs/0/noise has 1 element; there is no element 3");
  CHECK_ERROR_MENTIONS(patched(R"([{"op": "replace", "path": "/inputs/x", "value": 1}])"),
                       "/inputs is an array; \"x\" is not an index into it");
  CHECK_ERROR_MENTIONS(patched(R"([{"op": "replace", "path": "/inputs/01", "value": 1}])"), "\"01\" is not an index");
  CHECK_ERROR_MENTIONS(patched(R"([{"op": "add", "path": "/inputs/2", "value": 1}])"), "/inputs has 1 element; there is no element 2");
  CHECK_ERROR_MENTIONS(patched(R"([{"op": "remove", "path": "/inputs/-"}])"), "\"-\" is not an index");
  CHECK_ERROR_MENTIONS(patched(R"([{"op": "replace", "path": "/pseudo_ensemble/lambda", "value": 1}])"),
                       "/pseudo_ensemble has no member \"lambda\" to replace (\"add\" creates one)");
  CHECK_ERROR_MENTIONS(patched(R"([{"op": "add", "path": "/nodes/0/name", "value": 1}])"),
                       "the document has no member \"nodes\" (path \"/nodes/0/name\")");
  CHECK_ERROR_MENTIONS(patched(R"([{"op": "add", "path": "/inputs/0/name/first", "value": 1}])"),
                       "/inputs/0/name is a string, which has no member \"first\"");
}

}  // namespace test_json_patch
