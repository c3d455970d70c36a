#include "graph/attributes.h"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "graph/error.h"

namespace pens {

const char* attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::Int: return "int";
    case AttrType::Float: return "float";
    case AttrType::String: return "string";
    case AttrType::Ints: return "ints";
    case AttrType::Floats: return "floats";
  }
  return "?";
}

AttrType attr_type_of(const AttrValue& v) { return static_cast<AttrType>(v.index()); }

namespace {
std::string number(double x) {
  std::ostringstream out;
  out << std::setprecision(9) << x;
  return out.str();
}

template <class V>
std::string list(const std::vector<V>& xs) {
  std::string out = "[";
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) out += ",";
    if constexpr (std::is_same_v<V, double>) {
      out += number(xs[i]);
    } else {
      out += std::to_string(xs[i]);
    }
  }
  return out + "]";
}
}  // namespace

std::string attr_to_string(const AttrValue& v) {
  switch (attr_type_of(v)) {
    case AttrType::Int: return std::to_string(std::get<int64_t>(v));
    case AttrType::Float: return number(std::get<double>(v));
    case AttrType::String: return std::get<std::string>(v);
    case AttrType::Ints: return list(std::get<std::vector<int64_t>>(v));
    case AttrType::Floats: return list(std::get<std::vector<double>>(v));
  }
  return "?";
}

void Attributes::erase(std::string_view name) {
  auto it = items_.find(name);
  if (it != items_.end()) items_.erase(it);
}

const AttrValue* Attributes::find(std::string_view name) const {
  auto it = items_.find(name);
  return it == items_.end() ? nullptr : &it->second;
}

const AttrValue& Attributes::require(std::string_view name) const {
  const AttrValue* v = find(name);
  if (!v) fail("attribute '", name, "' is missing");
  return *v;
}

int64_t Attributes::get_int(std::string_view name) const {
  const AttrValue& v = require(name);
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  fail("attribute '", name, "' should be an int, got ", attr_type_name(attr_type_of(v)));
}

double Attributes::get_float(std::string_view name) const {
  const AttrValue& v = require(name);
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  fail("attribute '", name, "' should be a float, got ", attr_type_name(attr_type_of(v)));
}

const std::string& Attributes::get_string(std::string_view name) const {
  const AttrValue& v = require(name);
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  fail("attribute '", name, "' should be a string, got ", attr_type_name(attr_type_of(v)));
}

const std::vector<int64_t>& Attributes::get_ints(std::string_view name) const {
  const AttrValue& v = require(name);
  if (auto* s = std::get_if<std::vector<int64_t>>(&v)) return *s;
  fail("attribute '", name, "' should be a list of ints, got ",
       attr_type_name(attr_type_of(v)));
}

std::vector<double> Attributes::get_floats(std::string_view name) const {
  const AttrValue& v = require(name);
  if (auto* s = std::get_if<std::vector<double>>(&v)) return *s;
  if (auto* s = std::get_if<std::vector<int64_t>>(&v)) return {s->begin(), s->end()};
  fail("attribute '", name, "' should be a list of floats, got ",
       attr_type_name(attr_type_of(v)));
}

std::string Attributes::str() const {
  std::string out;
  for (const auto& [k, v] : items_) {
    if (!out.empty()) out += ", ";
    out += k + "=" + attr_to_string(v);
  }
  return out;
}

}  // namespace pens
