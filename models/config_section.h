// Reading the JSON config files of pens train and pens pretrain: one object at a time,
// refusing unknown keys (a misspelt key would otherwise be ignored silently) and values
// of the wrong type or range, each error naming the file and the field.
#pragma once

#include <cmath>
#include <exception>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <type_traits>

#include "graph/error.h"

namespace pens {

// Upper bound for seeds and other unbounded integers in a config.
inline constexpr double kConfigHuge = 1e15;

// Reads the fields of one JSON object of a config, refusing unknown keys (a misspelt
// key would otherwise be ignored silently) and values of the wrong type or range.
class Section {
 public:
  Section(const nlohmann::json& j, std::string path, const std::string& source) : path_(std::move(path)), source_(source) {
    if (!j.is_object()) fail(source_, ": ", where(""), " must be an object");
    j_ = &j;
  }
  ~Section() noexcept(false) {
    if (std::uncaught_exceptions() > 0) return;
    for (const auto& [key, value] : j_->items()) {
      if (!used_.count(key)) fail(source_, ": unknown field ", where(key));
    }
  }
  template <class T>
  void number(const char* key, T& out, double low, double high) {
    used_.insert(key);
    if (!j_->contains(key)) return;
    const nlohmann::json& v = (*j_)[key];
    if (!v.is_number()) fail(source_, ": ", where(key), " must be a number");
    const double d = v.get<double>();
    if (!(d >= low && d <= high)) fail(source_, ": ", where(key), " = ", d, " is outside [", low, ", ", high, "]");
    if (std::is_integral_v<T> && d != std::floor(d)) fail(source_, ": ", where(key), " must be an integer");
    out = static_cast<T>(d);
  }
  void string(const char* key, std::string& out) {
    used_.insert(key);
    if (!j_->contains(key)) return;
    if (!(*j_)[key].is_string()) fail(source_, ": ", where(key), " must be a string");
    out = (*j_)[key].get<std::string>();
  }
  const nlohmann::json* child(const char* key) {
    used_.insert(key);
    return j_->contains(key) ? &(*j_)[key] : nullptr;
  }
  std::string where(const std::string& key) const {
    return key.empty() ? (path_.empty() ? "the config" : path_) : (path_.empty() ? key : path_ + "." + key);
  }

 private:
  const nlohmann::json* j_ = nullptr;
  std::string path_;
  const std::string& source_;
  std::set<std::string> used_;
};

}  // namespace pens
