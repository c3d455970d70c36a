// Reading JSON text as pens does for model files and configs: one document and nothing
// after it (whitespace aside), valid UTF-8 without NUL bytes, numbers within double
// range, nesting at most 64 levels. Every problem is a pens::Error in pens' own words,
// "SOURCE:LINE:COLUMN: not valid JSON: <what is wrong>", never the JSON library's text.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace pens {

// Nesting deeper than this is refused before parsing: no model or config needs it, and it
// keeps a hostile file from exhausting the stack.
inline constexpr int kMaxJsonDepth = 64;

nlohmann::json parse_json_text(const std::string& text, const std::string& source);

}  // namespace pens
