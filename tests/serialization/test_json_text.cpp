// JSON text as model files and configs are read: pens' own messages with the place.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pens/ops/ir/error.h"
#include "pens/serialization/json_text.h"

namespace test_json_text {

using namespace pens;

namespace {
// The message parse_json_text gives for `text`, or "" when it parses.
std::string problem(const std::string& text) {
  try {
    parse_json_text(text, "f.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("JSON text: every problem in pens' words, with line and column, never the library's text") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "f.json: empty, expected a JSON document"},
      {" \n\t", "f.json: empty, expected a JSON document"},
      {"{\"a\": 1} tail", "f.json:1:10: not valid JSON: text after the JSON document"},
      {"{\"a\": 1}\n\n  {}", "f.json:3:3: not valid JSON: text after the JSON document"},
      {std::string("{\"a\": 1}\0\0", 10), "f.json:1:9: not valid JSON: a NUL byte"},
      {"{\"a\": \"\xff\"}", "f.json:1:8: not valid JSON: invalid UTF-8"},
      {"{\"a\": \"\xc0\xaf\"}", "f.json:1:8: not valid JSON: invalid UTF-8"},          // overlong '/'
      {"{\"a\": \"\xed\xa0\x80\"}", "f.json:1:8: not valid JSON: invalid UTF-8"},      // a surrogate
      {"{\"a\":\n  1e999}", "f.json:2:3: not valid JSON: the number 1e999 is out of range"},
      {"{\"a\": -2e400}", "f.json:1:7: not valid JSON: the number -2e400 is out of range"},
      {"{\"a\": 1", "f.json:1:8: not valid JSON: the text ends inside the document"},
      {"{\"a\": [1, 2,, 3]}", "f.json:1:13: not valid JSON: unexpected character ','"},
      {"{\"a\": nope}", "f.json:1:7: not valid JSON: a word that is not true, false or null"},
      {"{\"a\": \"x\ty\"}", "f.json:1:9: not valid JSON: a string with a control character"},
      {std::string(65, '[') + std::string(65, ']'), "f.json:1:65: not valid JSON: nested deeper than 64 levels"},
  };
  for (const auto& item : cases) {
    const auto& text = item.first;  // not bindings: doctest captures them (clang < 16)
    const auto& expected = item.second;
    INFO(text);
    const std::string got = problem(text);
    CHECK(got.rfind(expected, 0) == 0);
    CHECK(got.find("json.exception") == std::string::npos);
  }
  // What is valid stays valid: UTF-8 text, numbers at the edge of double range, nesting
  // of 64 levels, whitespace around the document.
  CHECK(problem("  {\"a\": \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\", \"b\": 1.7e308, \"c\": -0.0}\n\n") == "");
  CHECK(problem(std::string(64, '[') + std::string(64, ']')) == "");
  CHECK(parse_json_text("[1, \"x\"]", "f.json") == nlohmann::json::array({1, "x"}));
}

}  // namespace test_json_text
