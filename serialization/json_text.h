// Reading JSON text as pens does for model files and configs: one document and nothing
// after it (whitespace aside), valid UTF-8 without NUL bytes, numbers within double
// range, nesting at most 64 levels. Every problem is a pens::Error in pens' own words,
// "SOURCE:LINE:COLUMN: not valid JSON: <what is wrong>", never the JSON library's text.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace pens {

// Nesting deeper than this is refused before parsing: no model or config needs it, and it
// keeps a hostile file from exhausting the stack.
inline constexpr int kMaxJsonDepth = 64;

nlohmann::json parse_json_text(const std::string& text, const std::string& source);

// A JSON file of at most `max_bytes` (configs: 1 MiB), read and parsed as above; errors
// name the file.
nlohmann::json read_json_file(const std::string& path, uint64_t max_bytes = 1 << 20);

// JSON text laid out for reading and diffs: objects one member per line (indented by 2),
// arrays of scalars on one line when it stays within 100 columns and wrapped into lines of
// that width when longer (a shape takes one line, a vector of weights a few), arrays of
// objects or arrays one element per line. Scalars are written exactly as
// nlohmann::json::dump writes them, so numbers read back to the same bits and the text
// of a document is a function of its value alone.
std::string format_json(const nlohmann::json& j);

}  // namespace pens
