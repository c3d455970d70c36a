#include "pens/serialization/json_text.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "pens/ops/ir/error.h"
#include "pens/serialization/files.h"

namespace pens {

namespace {

// "source:line:column" of byte `offset` (lines and columns from 1, columns in bytes).
std::string place(const std::string& text, const std::string& source, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return cat(source, ":", line, ":", column);
}

[[noreturn]] void fail_at_byte(const std::string& text, const std::string& source, size_t offset,
                               const std::string& what) {
  fail(place(text, source, offset), ": not valid JSON: ", what);
}

// The length of the UTF-8 sequence starting at text[i], or 0 when it is not a valid one
// (overlong forms, surrogates and code points above U+10FFFF included).
size_t utf8_length(const std::string& text, size_t i) {
  const auto byte = [&](size_t k) { return k < text.size() ? static_cast<unsigned char>(text[k]) : 0u; };
  const unsigned c = byte(i);
  if (c < 0x80) return 1;
  const auto continuation = [&](size_t k) { return (byte(k) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return continuation(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned c1 = byte(i + 1);
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F)) return 0;
    return continuation(i + 1) && continuation(i + 2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned c1 = byte(i + 1);
    if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F)) return 0;
    return continuation(i + 1) && continuation(i + 2) && continuation(i + 3) ? 4 : 0;
  }
  return 0;
}

// What the parser cannot say well, checked on the raw text first: NUL bytes, UTF-8,
// nesting depth, numbers beyond double range. Strings are skipped for all but UTF-8.
// Returns where text after a complete object or array starts (the first byte that is
// not whitespace after the bracket closing the first one opened), or npos.
size_t check_text(const std::string& text, const std::string& source) {
  size_t trailing = std::string::npos;
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\0') fail_at_byte(text, source, i, "a NUL byte");
    const size_t length = utf8_length(text, i);
    if (length == 0) fail_at_byte(text, source, i, "invalid UTF-8");
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) fail_at_byte(text, source, i, cat("nested deeper than ", kMaxJsonDepth, " levels"));
    } else if (c == ']' || c == '}') {
      if (--depth == 0 && trailing == std::string::npos) trailing = text.find_first_not_of(" \t\r\n", i + 1);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t end = i;
      while (end < text.size() && std::string_view("+-.eE0123456789").find(text[end]) != std::string_view::npos) ++end;
      const std::string number = text.substr(i, end - i);
      if (std::isinf(std::strtod(number.c_str(), nullptr))) {
        fail_at_byte(text, source, i, cat("the number ", number, " is out of range (beyond 1.8e308)"));
      }
      i = end;
      continue;
    }
    i += length;
  }
  return trailing;
}

// The parser's complaint, in pens' words, and the byte it is about. `offset` (0-based) is
// where the parser stopped; `trailing` where text after the document starts (check_text).
struct SyntaxProblem {
  size_t offset;
  std::string what;
};
SyntaxProblem syntax_problem(const std::string& text, size_t offset, size_t trailing,
                             const std::string& library_message) {
  const auto says = [&](const char* s) { return library_message.find(s) != std::string::npos; };
  // "unexpected end of input" contains "expected end of input": test it first.
  if (says("unexpected end of input")) {
    return {offset, "the text ends inside the document (an object, array or string is not closed)"};
  }
  if (says("expected end of input")) return {std::min(offset, trailing), "text after the JSON document"};
  if (says("invalid literal")) {  // point at the word, not at where reading it failed
    while (offset > 0 && std::isalpha(static_cast<unsigned char>(text[offset - 1]))) --offset;
    return {offset, "a word that is not true, false or null (strings need quotes)"};
  }
  if (says("invalid string")) {
    return {offset, "a string with a control character or a bad escape (write \\n, \\t, \\u0001)"};
  }
  if (says("invalid number")) return {offset, "a malformed number"};
  if (offset < text.size()) {
    const auto c = static_cast<unsigned char>(text[offset]);
    if (c >= 0x20 && c < 0x7F) return {offset, cat("unexpected character '", text[offset], "'")};
  }
  return {offset, "unexpected text"};
}

}  // namespace

nlohmann::json parse_json_text(const std::string& text, const std::string& source) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) fail(source, ": empty, expected a JSON document");
  const size_t trailing = check_text(text, source);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte counts from 1 and points at the byte that could not be read.
    const SyntaxProblem problem = syntax_problem(text, e.byte > 0 ? e.byte - 1 : 0, trailing, e.what());
    fail_at_byte(text, source, problem.offset, problem.what);
  } catch (const nlohmann::json::exception&) {
    fail(source, ": not valid JSON");
  }
}

namespace {

constexpr size_t kLineWidth = 100;

bool all_scalars(const nlohmann::json& a) {
  return std::all_of(a.begin(), a.end(), [](const nlohmann::json& e) { return e.is_primitive(); });
}

// `n` elements between `open` and `close`, one per line at indent + 2, each written by
// item(i, column) with the column it starts at.
template <class Item>
void one_per_line(char open, char close, size_t n, size_t indent, std::string& out, const Item& item) {
  const std::string pad(indent + 2, ' ');
  out += open;
  out += '\n';
  for (size_t i = 0; i < n; ++i) {
    out += pad;
    item(i, pad.size());
    out += i + 1 < n ? ",\n" : "\n";
  }
  out += std::string(indent, ' ') + close;
}

// `out` is at column `column` (the indentation plus what precedes the value on its line).
void format_value(const nlohmann::json& j, size_t indent, size_t column, std::string& out) {
  if (j.is_object() && !j.empty()) {
    auto it = j.begin();
    one_per_line('{', '}', j.size(), indent, out, [&](size_t, size_t at) {
      const std::string key = nlohmann::json(it.key()).dump() + ": ";
      out += key;
      format_value(it.value(), indent + 2, at + key.size(), out);
      ++it;
    });
  } else if (j.is_array() && !j.empty() && !all_scalars(j)) {
    one_per_line('[', ']', j.size(), indent, out,
                 [&](size_t i, size_t at) { format_value(j[i], indent + 2, at, out); });
  } else if (j.is_array() && !j.empty()) {
    std::vector<std::string> items;
    size_t width = 2;  // the one-line form: brackets, items, ", " between them
    for (const nlohmann::json& e : j) {
      items.push_back(e.dump());
      width += items.back().size() + (items.size() > 1 ? 2 : 0);
    }
    if (column + width <= kLineWidth) {
      out += "[";
      for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
      out += "]";
      return;
    }
    // Wrapped: as many elements per line as fit.
    const std::string pad(indent + 2, ' ');
    out += "[\n" + pad;
    size_t at = pad.size();
    for (size_t i = 0; i < items.size(); ++i) {
      if (at > pad.size() && at + items[i].size() + 1 > kLineWidth) {
        out += "\n" + pad;
        at = pad.size();
      } else if (at > pad.size()) {
        out += " ";
        ++at;
      }
      out += items[i] + (i + 1 == items.size() ? "" : ",");
      at += items[i].size() + 1;
    }
    out += "\n" + std::string(indent, ' ') + "]";
  } else {
    out += j.dump();
  }
}

}  // namespace

std::string format_json(const nlohmann::json& j) {
  std::string out;
  format_value(j, 0, 0, out);
  return out;
}

nlohmann::json read_json_file(const std::string& path, uint64_t max_bytes) {
  return parse_json_text(read_file(path, max_bytes), path);
}

}  // namespace pens
