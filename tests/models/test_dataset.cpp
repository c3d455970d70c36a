// The semi-supervised protocol: balanced, disjoint, complete and reproducible splits.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "pens/models/dataset.h"
#include "pens/models/synthetic.h"
#include "tests/support/helpers.h"

namespace test_dataset {

using namespace pens;

TEST_CASE("the synthetic teacher task is deterministic and uses every class") {
  const Dataset a = make_teacher_task(500, 10, 4, 1);
  const Dataset b = make_teacher_task(500, 10, 4, 1);
  CHECK(a.x == b.x);
  CHECK(a.y == b.y);
  CHECK(make_teacher_task(500, 10, 4, 2).x != a.x);
  std::vector<int> counts(4, 0);
  for (float y : a.y) counts[static_cast<size_t>(y)]++;
  for (int c : counts) CHECK(c > 500 / 4 / 3);  // no class starved
}

TEST_CASE("permutation is a permutation, fixed by its seed and stream") {
  const std::vector<int64_t> p = permutation(1000, 3, 1);
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) CHECK(sorted[static_cast<size_t>(i)] == i);
  CHECK(permutation(1000, 3, 1) == p);
  CHECK(permutation(1000, 4, 1) != p);
  CHECK(permutation(1000, 3, 2) != p);
}

TEST_CASE("a semi-supervised split is balanced per class, disjoint, complete and deterministic") {
  const Dataset d = make_teacher_task(3000, 8, 10, 1);
  const Split s = semi_supervised_split(d, 100, 500, 7);
  CHECK(s.labeled.size() == 100);
  CHECK(s.validation.size() == 500);
  CHECK(s.unlabeled.size() == 2400);
  std::vector<int> per_class(10, 0);
  for (int64_t i : s.labeled) ++per_class[static_cast<size_t>(d.y[static_cast<size_t>(i)])];
  for (int c = 0; c < 10; ++c) CHECK_MESSAGE(per_class[static_cast<size_t>(c)] == 10, "class " << c);
  std::set<int64_t> all(s.labeled.begin(), s.labeled.end());
  all.insert(s.unlabeled.begin(), s.unlabeled.end());
  all.insert(s.validation.begin(), s.validation.end());
  CHECK(all.size() == 3000);  // disjoint and complete

  const Split again = semi_supervised_split(d, 100, 500, 7);
  CHECK(again.labeled == s.labeled);
  CHECK(again.validation == s.validation);
  CHECK(again.unlabeled == s.unlabeled);
  const Split other = semi_supervised_split(d, 100, 500, 8);
  CHECK(other.labeled != s.labeled);
}

TEST_CASE("examples without a label are never validation or labeled, and leave the others' split as it was") {
  Dataset d = make_teacher_task(3000, 8, 10, 3);
  const Split whole = semi_supervised_split(d, 100, 500, 7);
  // Unlabel every example the split left unlabeled but the first 100: the same rows are
  // drawn for validation and the labeled set.
  std::set<int64_t> without(whole.unlabeled.begin() + 100, whole.unlabeled.end());
  for (int64_t row : without) d.y[static_cast<size_t>(row)] = -1;
  CHECK(labeled_examples(d) == 700);
  const Split s = semi_supervised_split(d, 100, 500, 7);
  CHECK(s.validation == whole.validation);
  CHECK(s.labeled == whole.labeled);
  CHECK(s.unlabeled == whole.unlabeled);  // in the order they were walked
  CHECK_ERROR_MENTIONS(semi_supervised_split(d, 300, 500, 7), "do not fit a training set of 700 examples with labels");
}

TEST_CASE("impossible splits are refused with the reason") {
  const Dataset d = make_teacher_task(300, 8, 10, 1);
  CHECK_ERROR_MENTIONS(semi_supervised_split(d, 105, 10, 1), "105", "multiple of the 10 classes");
  CHECK_ERROR_MENTIONS(semi_supervised_split(d, 100, 250, 1), "do not fit a training set of 300");
  CHECK_ERROR_MENTIONS(semi_supervised_split(d, 290, 0, 1), "class", "are needed");
}

}  // namespace test_dataset
