#include "pens/ops/ir/suggest.h"

#include <algorithm>
#include <cctype>
#include <numeric>

namespace pens {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Optimal string alignment distance: Levenshtein plus the swap of two adjacent letters
// ("lgoits"), the commonest typing slip after a wrong or missing letter.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::vector<std::string> closest_names(std::string_view name, const std::vector<std::string>& choices) {
  // Names are short; a text of thousands of characters (a fuzzer's, a pasted line) gets no
  // suggestion rather than a quadratic comparison with every choice.
  constexpr size_t kLongest = 64;
  const std::string wanted = lower(name);
  if (wanted.empty() || wanted.size() > kLongest) return {};
  const size_t allowed = wanted.size() <= 4 ? 1 : wanted.size() <= 8 ? 2 : 3;
  // Ranked by distance, then by the length of the prefix shared (h2 is nearer h1 than W2),
  // then in the choices' order. A name inside another, or one sharing a long prefix
  // ("childs", "children"), counts as one edit beyond the allowance: after every near
  // spelling, before nothing.
  struct Ranked {
    size_t distance, prefix, order;
  };
  std::vector<Ranked> ranked;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i] == name || choices[i].size() > kLongest) continue;
    const std::string choice = lower(choices[i]);
    size_t prefix = 0;
    while (prefix < wanted.size() && prefix < choice.size() && wanted[prefix] == choice[prefix]) ++prefix;
    size_t distance = edit_distance(wanted, choice);
    const bool contains = wanted.size() >= 3 && (choice.find(wanted) != std::string::npos ||
                                                 (choice.size() >= 3 && wanted.find(choice) != std::string::npos));
    const bool long_prefix = prefix >= 4 && 2 * prefix >= wanted.size();
    if (distance > allowed && !contains && !long_prefix) continue;
    distance = std::min(distance, allowed + 1);
    ranked.push_back({distance, prefix, i});
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    return a.distance != b.distance ? a.distance < b.distance : a.prefix > b.prefix;
  });
  std::vector<std::string> out;
  for (const Ranked& r : ranked) {
    if (out.size() == 3) break;
    if (std::find(out.begin(), out.end(), choices[r.order]) == out.end()) out.push_back(choices[r.order]);
  }
  return out;
}

std::string unknown_name_hint(std::string_view name, const std::vector<std::string>& choices,
                              const std::string& choices_word, size_t list_at_most, const std::string& pointer) {
  std::string suggestion;
  for (const std::string& c : closest_names(name, choices)) {
    suggestion += (suggestion.empty() ? "did you mean '" : "' or '") + c;
  }
  if (!suggestion.empty()) suggestion += "'?";
  std::string list;
  if (!choices.empty() && choices.size() <= list_at_most) {
    list = choices_word + ": " + std::accumulate(std::next(choices.begin()), choices.end(), choices.front(),
                                                 [](std::string a, const std::string& b) { return a + ", " + b; });
  }
  std::string out;
  for (const std::string* part : std::initializer_list<const std::string*>{&suggestion, &list, &pointer}) {
    if (!part->empty()) out += (out.empty() ? "" : " ") + *part;
  }
  return out.empty() ? "" : " (" + out + ")";
}

}  // namespace pens
