// Configs with a base: the merge-patch rules of read_config_file, what a kind reads from a
// derived config, and the errors of a bad base.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "pens/train/config/config_file.h"
#include "pens/train/config/train_config.h"
#include "tests/support/helpers.h"
#include "tests/support/temp_dir.h"

namespace test_config_file {

using namespace pens;
using nlohmann::json;

namespace {

void write(const testing::TempDir& dir, const std::string& name, const json& j) {
  std::ofstream(dir / name) << j.dump(1);
}

const json kBase = {{"description", "the base"},
                    {"model", "m.model.json"},
                    {"batch", {{"labeled", 32}, {"unlabeled", 128}}},
                    {"optimizer", {{"kind", "adam"}, {"learning_rate", 0.002}, {"decay", 0.94}}},
                    {"lambda_schedule", json::array({{{"epochs", 10}, {"scale", 0}}, {{"epochs", 1}, {"scale", 1}}})},
                    {"run", {{"epochs", 50}, {"seed", 1}}}};

}  // namespace

TEST_CASE("a config without a base reads as its file") {
  testing::TempDir dir;
  write(dir, "a.json", kBase);
  CHECK(read_config_file(dir / "a.json") == kBase);
}

TEST_CASE("a config's members lay over its base's: objects merge, other values replace, null removes") {
  testing::TempDir dir;
  write(dir, "base.json", kBase);
  write(dir, "child.json", json::parse(R"({"description": "longer", "base": "base.json",
      "optimizer": {"decay": null, "anneal_start_epoch": 100, "anneal_end_epoch": 200},
      "lambda_schedule": [{"epochs": 1, "scale": 1}], "run": {"epochs": 200}})"));
  const json c = read_config_file(dir / "child.json");
  CHECK_FALSE(c.contains("base"));
  CHECK(c["description"] == "longer");
  CHECK(c["model"] == "m.model.json");
  CHECK(c["batch"] == kBase["batch"]);
  CHECK(c["optimizer"] == json::parse(R"({"kind": "adam", "learning_rate": 0.002, "anneal_start_epoch": 100,
      "anneal_end_epoch": 200})"));
  CHECK(c["lambda_schedule"] == json::parse(R"([{"epochs": 1, "scale": 1}])"));  // an array is replaced, not merged
  CHECK(c["run"] == json::parse(R"({"epochs": 200, "seed": 1})"));
  // The base's description is not inherited, and a chain resolves from the bottom up.
  write(dir, "grandchild.json", json::parse(R"({"base": "child.json", "batch": {"labeled": 64}})"));
  const json g = read_config_file(dir / "grandchild.json");
  CHECK_FALSE(g.contains("description"));
  CHECK(g["batch"] == json::parse(R"({"labeled": 64, "unlabeled": 128})"));
  CHECK(g["run"]["epochs"] == 200);
  CHECK(g["lambda_schedule"].size() == 1);
  // The resolved config is what the kind reads.
  const TrainConfig t = parse_train_config(g, dir / "grandchild.json");
  CHECK(t.batch_labeled == 64);
  CHECK(t.batch_unlabeled == 128);
  CHECK(t.epochs == 200);
}

TEST_CASE("a bad base is an error that names the config and what is wrong") {
  testing::TempDir dir;
  write(dir, "base.json", kBase);
  write(dir, "number.json", {{"base", 3}});
  CHECK_ERROR_MENTIONS(read_config_file(dir / "number.json"), "number.json", "base must be a string");
  write(dir, "missing.json", {{"base", "nope.json"}});
  CHECK_ERROR_MENTIONS(read_config_file(dir / "missing.json"), "missing.json", "base \"nope.json\"", "no such file");
  std::filesystem::create_directory(dir / "sub");
  write(dir, "sub/other.json", {{"base", "../base.json"}});
  CHECK_ERROR_MENTIONS(read_config_file(dir / "sub/other.json"), "other.json", "not in the config's own folder");
  write(dir, "a.json", {{"base", "b.json"}});
  write(dir, "b.json", {{"base", "a.json"}});
  CHECK_ERROR_MENTIONS(read_config_file(dir / "a.json"), "b.json", "makes a cycle: a.json -> b.json -> a.json");
  write(dir, "self.json", {{"base", "self.json"}});
  CHECK_ERROR_MENTIONS(read_config_file(dir / "self.json"), "makes a cycle: self.json -> self.json");
  write(dir, "array.json", json::array({1, 2}));
  write(dir, "on-array.json", {{"base", "array.json"}});
  CHECK_ERROR_MENTIONS(read_config_file(dir / "on-array.json"), "array.json", "a base config must be a JSON object");
  const auto deep = [](int i) { return "deep" + std::to_string(i) + ".json"; };
  for (int i = 0; i <= kMaxConfigBases; ++i) write(dir, deep(i), {{"base", deep(i + 1)}});
  write(dir, deep(kMaxConfigBases + 1), kBase);
  CHECK_ERROR_MENTIONS(read_config_file(dir / "deep0.json"), "more than 16 bases");
  CHECK(read_config_file(dir / "deep1.json")["run"]["epochs"] == 50);  // 16 bases are fine
  std::ofstream(dir / "broken.json") << "{\"run\": ";
  write(dir, "on-broken.json", {{"base", "broken.json"}});
  CHECK_ERROR_MENTIONS(read_config_file(dir / "on-broken.json"), "broken.json", "not valid JSON");
}

}  // namespace test_config_file
