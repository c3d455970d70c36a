// Tables of definitions looked up by name. The op registry is a NamedTable; noise kinds,
// penalty kinds and optimizer kinds are each a Registry: a process-wide NamedTable that
// starts with pens' built-in kinds and takes a program's own at start-up.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pens/ops/ir/error.h"
#include "pens/ops/ir/suggest.h"

namespace pens {

template <class T>
class NamedTable {
 public:
  // `what` names an entry in errors ("op", "noise kind"); `hint`, when given, says where
  // the names are listed, in place of listing them (a table too long to list).
  NamedTable(std::string what, std::string hint) : what_(std::move(what)), hint_(std::move(hint)) {}

  void add(T item) {
    if (items_.count(item.name)) fail(what_, " '", item.name, "' registered twice");
    std::string name = item.name;
    items_.emplace(std::move(name), std::make_unique<T>(std::move(item)));
  }
  const T* find(std::string_view name) const {
    auto it = items_.find(name);
    return it == items_.end() ? nullptr : it->second.get();
  }
  const T& at(std::string_view name) const {
    const T* item = find(name);
    if (!item) fail(unknown(name));
    return *item;
  }
  // "unknown noise kind 'gausian' (did you mean 'gaussian'? registered: ...)", for callers
  // that look up with find() and word the error themselves.
  std::string unknown(std::string_view name) const {
    if constexpr (requires(const T& t) { t.aliases; }) {  // kinds another name is commoner for
      for (const auto& [key, item] : items_) {
        if (std::find(item->aliases.begin(), item->aliases.end(), name) != item->aliases.end()) {
          return cat("unknown ", what_, " '", name, "' (", name, " is the kind '", key, "')");
        }
      }
    }
    std::vector<std::string> keys;
    for (const auto& [key, item] : items_) keys.push_back(key);
    return cat("unknown ", what_, " '", name, "'",
               unknown_name_hint(name, keys, "registered", hint_.empty() ? keys.size() : 0, hint_));
  }
  // Every entry, sorted by name. Entries never move once added.
  std::vector<const T*> all() const {
    std::vector<const T*> out;
    for (const auto& [name, item] : items_) out.push_back(item.get());
    return out;
  }
  // "a, b, c": the names, sorted, for messages.
  std::string names() const {
    std::string out;
    for (const auto& [name, item] : items_) out += (out.empty() ? "" : ", ") + name;
    return out;
  }

 private:
  std::string what_;
  std::string hint_;
  std::map<std::string, std::unique_ptr<T>, std::less<>> items_;
};

// The built-in kinds of a Registry<T>, defined next to the kinds (graph/noise.cpp, ...).
template <class T>
std::vector<T> builtin_kinds();

// A process-wide table of T, filled with builtin_kinds<T>() on first use. T has a `name`
// and names itself in errors with `static constexpr const char* kWhat`.
template <class T>
class Registry {
 public:
  static const NamedTable<T>& global() { return mutable_global(); }
  // Adds a kind defined outside pens. Register at start-up, before building graphs or
  // runs that use it: registration is not synchronized with concurrent lookups.
  static void register_global(T kind) { mutable_global().add(std::move(kind)); }

 private:
  static NamedTable<T>& mutable_global() {
    static NamedTable<T> table = [] {
      NamedTable<T> t(T::kWhat, "");
      for (T& kind : builtin_kinds<T>()) t.add(std::move(kind));
      return t;
    }();
    return table;
  }
};

}  // namespace pens
