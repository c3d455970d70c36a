// "Did you mean": what an error about a name that was not found adds, so that a misspelt
// field, node, op, kind, attribute or option is answered with the names that were meant.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pens {

// The choices nearest to `name`, nearest first (ties: the longer shared prefix first,
// then the choices' order): those within an edit distance (insertions, deletions,
// substitutions, adjacent transpositions; case ignored) of 1 for names of up to 4
// letters, 2 up to 8 and 3 beyond, then those that contain the name or are contained in
// it, or share a prefix of 4 letters or more and at least half the name. At most 3; none
// for a name (or choice) of more than 64 characters.
std::vector<std::string> closest_names(std::string_view name, const std::vector<std::string>& choices);

// What follows "unknown X 'name'" in a message: " (did you mean 'a'? choices: a, b, c)";
// the choices are listed only when there are at most `list_at_most` of them, and the
// suggestion only when there is one; `pointer` (where the choices are listed instead:
// "`pens ops` lists them") closes the parenthesis. Empty when there is none of the three.
// `choices_word` names the list ("choices", "registered", "nodes").
std::string unknown_name_hint(std::string_view name, const std::vector<std::string>& choices,
                              const std::string& choices_word = "choices", size_t list_at_most = 30,
                              const std::string& pointer = "");

}  // namespace pens
