#include "pens/ops/ir/attributes.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

#include "pens/ops/ir/error.h"
#include "pens/ops/ir/suggest.h"

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

bool AttrRange::contains(double v) const {
  if (std::isnan(v)) return false;
  return (min_open ? v > min : v >= min) && (max_open ? v < max : v <= max);
}

bool AttrRange::bounded() const {
  return min > -std::numeric_limits<double>::infinity() || max < std::numeric_limits<double>::infinity();
}

std::string AttrRange::str() const {
  const bool bounded_below = min > -std::numeric_limits<double>::infinity();
  const bool bounded_above = max < std::numeric_limits<double>::infinity();
  if (bounded_below && bounded_above) return cat("in ", min_open ? "(" : "[", min, ", ", max, max_open ? ")" : "]");
  if (bounded_below) return cat(min_open ? "> " : ">= ", min);
  if (bounded_above) return cat(max_open ? "< " : "<= ", max);
  return "a number";
}

void normalize_attrs(const std::vector<AttrSpec>& schema, Attributes& attrs, const std::string& owner) {
  normalize_attrs(schema, attrs, [&] { return owner; });
}

void normalize_attrs(const std::vector<AttrSpec>& schema, Attributes& attrs,
                     const std::function<std::string()>& owner) {
  for (const auto& item : attrs.items()) {
    const std::string& key = item.first;
    const AttrValue& value = item.second;
    auto spec = std::find_if(schema.begin(), schema.end(),
                             [&](const AttrSpec& s) { return s.name == key; });
    if (spec == schema.end()) {
      std::vector<std::string> names;
      for (const AttrSpec& s : schema) names.push_back(s.name);
      fail(owner(), ": unknown attribute '", key, "'", names.empty() ? " (takes none)" : unknown_name_hint(key, names, "takes"));
    }
    AttrType got = attr_type_of(value);
    bool ok = got == spec->type || (spec->type == AttrType::Float && got == AttrType::Int) ||
              (spec->type == AttrType::Floats && got == AttrType::Ints) ||
              // An empty list parses as either kind of list.
              (spec->type == AttrType::Ints && got == AttrType::Floats &&
               std::get<std::vector<double>>(value).empty());
    if (!ok) {
      fail(owner(), ": attribute '", key, "' should be ", attr_type_name(spec->type), ", got ",
           attr_type_name(got));
    }
    const auto check = [&](double v) {
      if (!spec->range.contains(v)) fail(owner(), ": attribute '", key, "' must be ", spec->range.str(), ", got ", v);
    };
    // Tensors hold float32: a real attribute beyond its range would become infinite there.
    const auto check_real = [&](double v) {
      check(v);
      if (!(std::abs(v) <= std::numeric_limits<float>::max())) {
        fail(owner(), ": attribute '", key, "' = ", v, " does not fit in float32 (magnitude at most ",
             std::numeric_limits<float>::max(), ")");
      }
    };
    if (const auto* x = std::get_if<double>(&value)) check_real(*x);
    if (const auto* x = std::get_if<int64_t>(&value)) check(static_cast<double>(*x));
    if (const auto* x = std::get_if<std::vector<double>>(&value)) std::for_each(x->begin(), x->end(), check_real);
    if (const auto* x = std::get_if<std::vector<int64_t>>(&value)) {
      for (int64_t e : *x) check(static_cast<double>(e));
    }
  }
  for (const AttrSpec& spec : schema) {
    if (attrs.has(spec.name)) {
      // Store ints given for float attributes as floats: one representation per value.
      const AttrValue& v = *attrs.find(spec.name);
      if (spec.type == AttrType::Float && attr_type_of(v) == AttrType::Int) {
        attrs.set(spec.name, static_cast<double>(std::get<int64_t>(v)));
      } else if (spec.type == AttrType::Floats && attr_type_of(v) == AttrType::Ints) {
        attrs.set(spec.name, attrs.get_floats(spec.name));
      } else if (spec.type == AttrType::Ints && attr_type_of(v) == AttrType::Floats) {
        attrs.set(spec.name, std::vector<int64_t>{});
      }
      continue;
    }
    if (spec.required) {
      fail(owner(), ": missing required attribute '", spec.name, "'");
    }
    if (auto* d = std::get_if<AttrValue>(&spec.default_value)) attrs.set(spec.name, *d);
  }
}

}  // namespace pens
