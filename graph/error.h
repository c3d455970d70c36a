// pens reports every user-facing problem (bad graph, bad shapes, bad files, bad data)
// as pens::Error with a message that names the thing that is wrong. Nothing aborts.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace pens {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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

}  // namespace pens
