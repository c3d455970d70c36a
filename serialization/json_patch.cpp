#include "pens/serialization/json_patch.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "pens/ops/ir/error.h"

namespace pens {

using nlohmann::json;

namespace {

// The reference tokens of a JSON pointer ("/a/b~1c" -> a, b/c), or an Error.
std::vector<std::string> pointer_tokens(const std::string& path, const std::string& where) {
  if (path.empty() || path[0] != '/') {
    fail(where, ": path \"", path, "\" is not a JSON pointer to a member (one starts with '/': \"/inputs/0/noise/0/eps\")");
  }
  std::vector<std::string> tokens;
  std::string token;
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      tokens.push_back(token);
      token.clear();
    } else if (path[i] == '~') {
      const char next = i + 1 < path.size() ? path[i + 1] : '\0';
      if (next != '0' && next != '1') fail(where, ": path \"", path, "\": '~' must be followed by 0 ('~') or 1 ('/')");
      token += next == '0' ? '~' : '/';
      ++i;
    } else {
      token += path[i];
    }
  }
  return tokens;
}

const char* type_name(const json& j) {
  switch (j.type()) {
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::null: return "null";
    default: return "a number";
  }
}

// An array index token: digits without a leading zero, below the array's size (up to it,
// where "add" may insert at the end).
size_t array_index(const std::string& token, size_t size, bool to_end, const std::string& where, const std::string& at) {
  const bool digits = !token.empty() && std::ranges::all_of(token, [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || (token.size() > 1 && token[0] == '0') || token.size() > 9) {
    fail(where, ": ", at, " is an array; \"", token, "\" is not an index into it");
  }
  const size_t index = std::stoul(token);
  if (index > size || (index == size && !to_end)) {
    fail(where, ": ", at, " has ", size, " element", size == 1 ? "" : "s", "; there is no element ", index,
         to_end ? " (\"add\" inserts before an element, or at the end with \"-\")" : "");
  }
  return index;
}

void apply_one(json& doc, const json& op, const std::string& where) {
  if (!op.is_object()) fail(where, " must be an object {\"op\", \"path\", \"value\"}, not ", type_name(op));
  for (const auto& [key, value] : op.items()) {
    if (key != "op" && key != "path" && key != "value") {
      fail(where, ": unknown field \"", key, "\" (an operation has \"op\", \"path\" and, to add or replace, \"value\")");
    }
  }
  if (!op.contains("op") || !op["op"].is_string()) fail(where, ": \"op\" must be \"add\", \"replace\" or \"remove\"");
  const std::string kind = op["op"].get<std::string>();
  if (kind != "add" && kind != "replace" && kind != "remove") {
    fail(where, ": op \"", kind, "\" is not one pens applies (\"add\", \"replace\" or \"remove\")");
  }
  if (!op.contains("path") || !op["path"].is_string()) fail(where, ": \"path\" must be a string, a JSON pointer");
  const std::string path = op["path"].get<std::string>();
  const bool takes_value = kind != "remove";
  if (takes_value != op.contains("value")) {
    fail(where, ": op \"", kind, "\" ", takes_value ? "needs a \"value\"" : "takes no \"value\"");
  }
  const std::vector<std::string> tokens = pointer_tokens(path, where);

  // Down to the member's container, then the operation on the last token.
  json* at = &doc;
  std::string walked;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    const std::string here = walked.empty() ? std::string("the document") : walked;
    if (at->is_object()) {
      if (!at->contains(t)) fail(where, ": ", here, " has no member \"", t, "\" (path \"", path, "\")");
      at = &(*at)[t];
    } else if (at->is_array()) {
      at = &(*at)[array_index(t, at->size(), false, where, here)];
    } else {
      fail(where, ": ", here, " is ", type_name(*at), ", which has no member \"", t, "\" (path \"", path, "\")");
    }
    walked += "/" + t;
  }
  const std::string& last = tokens.back();
  const std::string here = walked.empty() ? std::string("the document") : walked;
  if (at->is_object()) {
    if (kind != "add" && !at->contains(last)) {
      fail(where, ": ", here, " has no member \"", last, "\" to ", kind, " (\"add\" creates one)");
    }
    if (kind == "remove") {
      at->erase(last);
    } else {
      (*at)[last] = op["value"];
    }
  } else if (at->is_array()) {
    if (kind == "add") {
      // "-" appends; an index inserts before that element (the size appends too).
      const size_t index = last == "-" ? at->size() : array_index(last, at->size(), true, where, here);
      at->insert(at->begin() + static_cast<std::ptrdiff_t>(index), op["value"]);
    } else {
      const size_t index = array_index(last, at->size(), false, where, here);
      if (kind == "remove") {
        at->erase(at->begin() + static_cast<std::ptrdiff_t>(index));
      } else {
        (*at)[index] = op["value"];
      }
    }
  } else {
    fail(where, ": ", here, " is ", type_name(*at), ", which has no member \"", last, "\" (path \"", path, "\")");
  }
}

}  // namespace

json apply_json_patch(json doc, const json& patch, const std::string& source) {
  if (!patch.is_array()) fail(source, " must be an array of operations, not ", type_name(patch));
  for (size_t i = 0; i < patch.size(); ++i) apply_one(doc, patch[i], cat(source, "[", i, "]"));
  return doc;
}

}  // namespace pens
