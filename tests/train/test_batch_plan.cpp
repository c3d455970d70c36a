// What a run's steps read: the unlabeled pool of a split, with and without the validation
// images (data.unlabeled_validation), and the config field that chooses.
#include <doctest/doctest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "pens/models/synthetic.h"
#include "pens/train/config/train_config.h"
#include "pens/train/tasks/batch_plan.h"
#include "tests/support/helpers.h"

namespace test_batch_plan {

using namespace pens;
using nlohmann::json;

namespace {

TrainConfig split_config(bool unlabeled_validation) {
  TrainConfig c;
  c.labeled = 40;
  c.validation = 100;
  c.split_seed = 3;
  c.unlabeled_validation = unlabeled_validation;
  return c;
}

std::set<int64_t> as_set(const std::vector<int64_t>& rows) { return {rows.begin(), rows.end()}; }

}  // namespace

TEST_CASE("the unlabeled pool: every non-validation row, and with data.unlabeled_validation the validation rows too") {
  const Dataset d = make_teacher_task(500, 8, 4, 1);
  BatchPlan without(split_config(false), d);
  BatchPlan with(split_config(true), d);

  // The split itself does not change: the validation images are still held out of the
  // labeled set and still pick the model.
  CHECK(with.split().labeled == without.split().labeled);
  CHECK(with.split().validation == without.split().validation);
  CHECK(with.split().unlabeled == without.split().unlabeled);

  const std::set<int64_t> validation = as_set(without.split().validation);
  CHECK(without.pool().size() == 400);
  CHECK(std::ranges::none_of(without.pool(), [&](int64_t r) { return validation.contains(r); }));
  const std::set<int64_t> pool = as_set(with.pool());
  CHECK(with.pool().size() == 500);
  CHECK(pool.size() == 500);  // each row once
  CHECK(std::ranges::all_of(validation, [&](int64_t r) { return pool.contains(r); }));

  // One pass over the pool's shuffle draws each of its rows once, the validation rows among them.
  std::vector<int64_t> drawn;
  with.unlabeled(0, 500, drawn);
  CHECK(as_set(drawn).size() == 500);
  CHECK(std::ranges::count_if(drawn, [&](int64_t r) { return validation.contains(r); }) == 100);
  // The labeled rows' sequence is the same either way.
  std::vector<int64_t> labeled_with, labeled_without;
  with.labeled(0, 100, labeled_with);
  without.labeled(0, 100, labeled_without);
  CHECK(labeled_with == labeled_without);
}

TEST_CASE("data.unlabeled_validation: read from a config, written back, and a non-boolean is an error naming it") {
  const TrainConfig c =
      parse_train_config(json::parse(R"({"model": "m.json", "data": {"unlabeled_validation": true}})"), "c.json");
  CHECK(c.unlabeled_validation);
  CHECK_FALSE(parse_train_config(json::parse(R"({"model": "m.json"})"), "c.json").unlabeled_validation);
  CHECK(parse_train_config(to_json(c), "again").unlabeled_validation);
  CHECK_ERROR_MENTIONS(
      parse_train_config(json::parse(R"({"model": "m.json", "data": {"unlabeled_validation": 1}})"), "c.json"),
      "c.json", "data.unlabeled_validation", "true or false");
}

}  // namespace test_batch_plan
