// A table of definitions looked up by name: the op registry and the noise-kind registry
// are both one of these.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graph/error.h"

namespace pens {

template <class T>
class NamedTable {
 public:
  // `what` names an entry in errors ("op", "noise kind"); `hint` follows an unknown name.
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
    if (!item) fail("unknown ", what_, " '", name, "'", hint_);
    return *item;
  }
  // Every entry, sorted by name. Entries never move once added.
  std::vector<const T*> all() const {
    std::vector<const T*> out;
    for (const auto& [name, item] : items_) out.push_back(item.get());
    return out;
  }

 private:
  std::string what_;
  std::string hint_;
  std::map<std::string, std::unique_ptr<T>, std::less<>> items_;
};

}  // namespace pens
