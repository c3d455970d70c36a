#include "cli/args.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "pens/ops/ir/error.h"
#include "pens/ops/ir/suggest.h"

namespace pens::cli {

namespace {
// Parses all of `text` with `parse` (std::stoll, std::stod), or fails naming the option.
template <class Parse>
auto parse_whole(const std::string& name, const std::string& text, Parse parse, const char* what) {
  try {
    size_t used = 0;
    const auto x = parse(text, &used);
    if (used != text.size()) throw std::invalid_argument(text);
    return x;
  } catch (const std::exception&) {
    fail("option --", name, " needs ", what, ", got '", text, "'");
  }
}
}  // namespace

Args::Args(const std::vector<std::string>& argv, const std::vector<std::string>& flags,
           const std::vector<std::string>& options) {
  auto known = [](const std::vector<std::string>& list, const std::string& name) {
    return std::find(list.begin(), list.end(), name) != list.end();
  };
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (known(flags, name)) {
      if (inline_value) fail("option --", name, " takes no value");
      values_[name].push_back("1");
    } else if (known(options, name)) {
      if (!inline_value) {
        if (i + 1 >= argv.size()) fail("option --", name, " needs a value");
        value = argv[++i];
      }
      values_[name].push_back(value);
    } else {
      std::vector<std::string> all;
      for (const auto* list : {&flags, &options}) {
        for (const std::string& o : *list) all.push_back("--" + o);
      }
      // The command's options are listed by --help: here only the nearest ones.
      const bool near = !closest_names("--" + name, all).empty();
      fail("unknown option --", name, near ? unknown_name_hint("--" + name, all, "", 0, "See --help.") : " (see --help)");
    }
  }
}

bool Args::flag(const std::string& name) const { return values_.count(name) != 0; }

std::optional<std::string> Args::option(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

const std::string& Args::one_positional(const char* what) const {
  if (positional_.empty()) fail("missing ", what);
  if (positional_.size() > 1) fail("unexpected argument '", positional_[1], "'");
  return positional_[0];
}

double Args::parse_double(const std::string& name, double fallback) const {
  auto v = option(name);
  if (!v) return fallback;
  return parse_whole(name, *v, [](const std::string& s, size_t* used) { return std::stod(s, used); },
                     "a number");
}

int64_t Args::parse_int(const std::string& name, int64_t fallback) const {
  auto v = option(name);
  if (!v) return fallback;
  return parse_whole(name, *v, [](const std::string& s, size_t* used) { return std::stoll(s, used); },
                     "an integer");
}

int64_t Args::option_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const {
  const int64_t v = parse_int(name, fallback);
  if (v < lo || v > hi) fail("--", name, " must be an integer from ", lo, " to ", hi, ", got ", v);
  return v;
}

std::optional<int64_t> Args::given_int(const std::string& name, int64_t lo, int64_t hi) const {
  if (!option(name)) return std::nullopt;
  return option_int(name, 0, lo, hi);
}

std::optional<double> Args::given_double(const std::string& name, const AttrRange& range) const {
  if (!option(name)) return std::nullopt;
  return option_double(name, 0, range);
}

double Args::option_double(const std::string& name, double fallback, const AttrRange& range) const {
  const double v = parse_double(name, fallback);
  if (!std::isfinite(v) || !range.contains(v)) {
    const std::string bounds = range.bounded() ? " " + range.str() : "";
    fail("--", name, " must be a finite number", bounds, ", got ", *option(name));
  }
  return v;
}

VocabularyPolicy vocabulary_policy(const Args& args, const VocabularyPolicy& defaults) {
  return {args.option_int("min-count", defaults.min_count, 1, kMaxCount), defaults.lowercase || args.flag("lowercase")};
}

}  // namespace pens::cli
