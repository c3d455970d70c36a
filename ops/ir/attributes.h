// Node attributes: a small typed dictionary. Each op declares the attributes it takes
// (name, type, default) and graph construction checks a node's attributes against that
// schema, fills in defaults and rejects unknown names, so kernels can read them
// without further checks.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace pens {

using AttrValue =
    std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>>;

enum class AttrType { Int, Float, String, Ints, Floats };

const char* attr_type_name(AttrType t);
AttrType attr_type_of(const AttrValue& v);
std::string attr_to_string(const AttrValue& v);

class Attributes {
 public:
  using Map = std::map<std::string, AttrValue, std::less<>>;

  Attributes() = default;
  Attributes(std::initializer_list<std::pair<const std::string, AttrValue>> items)
      : items_(items) {}

  bool has(std::string_view name) const { return items_.find(name) != items_.end(); }
  void set(std::string name, AttrValue value) { items_[std::move(name)] = std::move(value); }

  // Typed reads; a Float read accepts an Int value, a Floats read accepts Ints.
  // A missing attribute or a wrong type throws an Error naming the attribute.
  int64_t get_int(std::string_view name) const;
  double get_float(std::string_view name) const;
  const std::string& get_string(std::string_view name) const;
  const std::vector<int64_t>& get_ints(std::string_view name) const;
  std::vector<double> get_floats(std::string_view name) const;

  const AttrValue* find(std::string_view name) const;
  const Map& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  std::string str() const;  // "axis=1, p=0.5"

  bool operator==(const Attributes& o) const { return items_ == o.items_; }

 private:
  const AttrValue& require(std::string_view name) const;
  Map items_;
};

// One entry of an op's attribute schema. An attribute without a default and not
// required is optional: kernels test for it with has().
// The values a numeric attribute (or each element of a numeric list) may take:
// from `min` to `max`, either end open; NaN never.
struct AttrRange {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false, max_open = false;

  static AttrRange at_least(double v) { return {v}; }
  static AttrRange above(double v) { return {v, std::numeric_limits<double>::infinity(), true}; }
  static AttrRange from_to(double lo, double hi) { return {lo, hi}; }
  static AttrRange from_below(double lo, double hi) { return {lo, hi, false, true}; }  // [lo, hi)
  bool contains(double v) const;
  bool bounded() const;     // false: any number (NaN aside)
  std::string str() const;  // ">= 0", "> 0", "in [0, 1)"
};

struct AttrSpec {
  std::string name;
  AttrType type;
  bool required = false;
  std::variant<std::monostate, AttrValue> default_value{};
  std::string doc;
  AttrRange range{};
};

// Checks `attrs` against `schema`: no unknown names, the declared types (an int is
// accepted, and stored, as a float where a float is declared), numbers in their ranges,
// required ones present; fills in defaults. Errors start with `owner` ("node 'h1'
// (dropout)").
void normalize_attrs(const std::vector<AttrSpec>& schema, Attributes& attrs,
                     const std::string& owner);
// The same with the owner's name made only for an error: graphs built per example (a
// tree each) normalise every node, and formatting a name each time cost more than the
// checks.
void normalize_attrs(const std::vector<AttrSpec>& schema, Attributes& attrs,
                     const std::function<std::string()>& owner);

}  // namespace pens
