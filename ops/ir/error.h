// pens reports every user-facing problem (bad graph, bad shapes, bad files, bad data)
// as pens::Error with a message that names the thing that is wrong. Nothing aborts.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace pens {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, std::string node = {}, std::string field = {})
      : std::runtime_error(message), node_(std::move(node)), field_(std::move(field)) {}
  // The graph node the error is about, as the model file names it, when there is one:
  // readers of model files turn it into the JSON path of that node.
  const std::string& node() const { return node_; }
  // The field the error is about, when the code that found it knows: a JSON pointer
  // relative to the entry of node() ("noise/0"), or, when node() is empty, relative to
  // the pseudo-ensemble spec ("penalties/0/kind").
  const std::string& field() const { return field_; }

 private:
  std::string node_;
  std::string field_;
};

// Concatenates its arguments with operator<< into one string.
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(cat(args...));
}

// An error about one node; the message should name it too.
template <class... Args>
[[noreturn]] void fail_at(const std::string& node, const Args&... args) {
  throw Error(cat(args...), node);
}

}  // namespace pens
