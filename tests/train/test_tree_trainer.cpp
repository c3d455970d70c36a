// Training on trees end to end: a treebank made in the test (sentiment carried by a few
// words), pens' tree trainer with its run folder, and the training accuracy it reaches.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "pens/models/ctn.h"
#include "pens/serialization/files.h"
#include "pens/serialization/model_file.h"
#include "pens/train/config/tree_config.h"
#include "pens/train/loop/run.h"
#include "pens/train/loop/run_folder.h"
#include "pens/train/tasks/skipgram.h"
#include "pens/train/tasks/tree_model.h"
#include "pens/train/tasks/tree_trainer.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"
#include "tests/support/treebank.h"

namespace test_tree_trainer {

using namespace pens;
using pens::testing::TempDir;

namespace {

// A treebank of random trees in `dir` (train.txt, dev.txt, test.txt), read back with its
// vocabulary (min_count 1).
TreeData make_treebank(const TempDir& dir, int train, int dev, int test, uint64_t seed) {
  pens::testing::write_treebank(dir.path(), train, dev, test, seed);
  return load_tree_data("sst", dir.path(), {}, {});
}

}  // namespace

TEST_CASE("a short training run on 200 trees raises training accuracy, and writes its run folder") {
  TempDir dir;
  const TreeData data = make_treebank(dir, 200, 40, 40, 17);
  CHECK(data.vocabulary.size() == 9);
  save_model(build_ctn({.vocabulary = data.vocabulary.size(), .dim = 8, .classes = 5, .fuzz = 0.02, .subspace = 6}),
             dir / "ctn.model.json");

  TreeConfig config;
  config.model = dir / "ctn.model.json";
  config.data_dir = dir.path();
  config.batch_trees = 10;
  config.schedule.learning_rate = 0.05;
  config.l2 = {{"T", 1e-4}, {"E", 1e-4}};
  config.epochs = 8;
  config.eval_samples = 5;
  config.train_eval_trees = 50;
  TrainObserver quiet;

  // Accuracy before training: the same parameters the run starts from.
  Model start = load_model(config.model);
  start.values = std::make_shared<ParamStore<float>>(start.graph);
  start.values->initialize(start.graph, config.init_seed);
  const TreeModel tm(start, SentimentTask::Fine);
  const double before = tm.evaluate(*start.values, data.bank.train, 5, 1).node_accuracy();

  const TrainSummary s = train_trees(config, data, dir / "run", quiet);
  REQUIRE(s.json["status"] == "finished");
  CHECK(s.json["epochs"].get<double>() == doctest::Approx(8));
  const Model trained = load_model(dir / "run/model.json");
  const double after = TreeModel(trained, SentimentTask::Fine).evaluate(*trained.values, data.bank.train, 5, 1).node_accuracy();
  INFO("node accuracy before " << before << ", after " << after);
  CHECK(after > before + 0.15);
  std::ifstream metrics(dir / "run/metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(metrics, line);) ++lines;
  CHECK(lines == 8);  // one evaluation per epoch

  // The epochs evaluated with 5 draws; the best-dev model is evaluated again with
  // eval.final_samples (50), and that is the run's test figure.
  const nlohmann::json& f = s.json["best_dev"]["final_evaluation"];
  REQUIRE(f["samples"] == 50);
  const Model best = load_model(dir / "run/best.model.json");
  const uint64_t eval_seed = config.seed + 0x5eed;  // the trainer's evaluation seed
  const TreeModel best_tm(best, SentimentTask::Fine);
  const auto accuracy = [&](const std::vector<SentimentTree>& trees) {
    return best_tm.evaluate(*best.values, trees, 50, eval_seed).root_accuracy();
  };
  CHECK(f["test_root_accuracy"].get<double>() == accuracy(data.bank.test));
  CHECK(f["dev_root_accuracy"].get<double>() == accuracy(data.bank.dev));
  CHECK(s.json["test_root_accuracy"] == f["test_root_accuracy"]);
}

TEST_CASE("the trainer refuses a model whose word vectors do not fit the vocabulary") {
  TempDir dir;
  const TreeData data = make_treebank(dir, 5, 5, 5, 3);
  save_model(build_ctn({.vocabulary = 3, .dim = 4}), dir / "ctn.model.json");
  TreeConfig config;
  config.model = dir / "ctn.model.json";
  config.data_dir = dir.path();
  TrainObserver quiet;
  CHECK_THROWS_WITH_AS(train_trees(config, data, dir / "run", quiet),
                       doctest::Contains("E has 3 rows but the vocabulary"), Error);
}

TEST_CASE("a tree run resumed from its checkpoint ends where an unbroken one does") {
  TempDir dir;
  const TreeData data = make_treebank(dir, 60, 10, 10, 5);
  for (const bool forest : {true, false}) {  // CTN: one graph per step; CTN+F+S: per tree
    CAPTURE(forest);
    save_model(build_ctn({.vocabulary = data.vocabulary.size(), .dim = 6, .classes = 2, .fuzz = forest ? 0.0 : 0.02,
                          .subspace = forest ? 0 : 3, .activation_noise = 0.05}),
               dir / "ctn.model.json");
    TreeConfig config;
    config.task = "binary";
    config.model = dir / "ctn.model.json";
    config.data_dir = dir.path();
    config.batch_trees = 7;
    config.l2 = {{"T", 1e-3}};
    config.freeze_words_epochs = 1;
    config.eval_samples = 3;
    config.epochs = 4;
    TrainObserver quiet;
    const TrainSummary unbroken = train_trees(config, data, dir / "unbroken", quiet);
    config.epochs = 2;
    train_trees(config, data, dir / "resumed", quiet);
    config.epochs = 4;
    const TrainSummary resumed = train_trees(config, data, dir / "resumed", quiet, true);
    // The final evaluation of a subspace model reads the best-dev model from the folder, so
    // a resumed run makes it as the unbroken one did; a model without subspaces has none.
    CHECK(unbroken.json["best_dev"].contains("final_evaluation") == !forest);
    CHECK(resumed.json["best_dev"] == unbroken.json["best_dev"]);
    const Model a = load_model(dir / "unbroken/model.json"), b = load_model(dir / "resumed/model.json");
    for (const ParamEntry& e : a.values->entries()) {
      const TensorView<const float> x = a.values->value(e), y = b.values->value(e);
      for (int64_t i = 0; i < x.size(); ++i) REQUIRE(x[i] == y[i]);
    }
  }
}

TEST_CASE("word freezing holds the table the cell looks up by its words port, whatever its name") {
  TempDir dir;
  const TreeData data = make_treebank(dir, 40, 10, 10, 21);
  save_model(build_ctn({.vocabulary = data.vocabulary.size(), .dim = 5, .classes = 5}), dir / "ctn.model.json");
  // The CTN with its word table renamed from E.
  std::string text = read_file(dir / "ctn.model.json", 1 << 20);
  for (size_t at = text.find("\"E\""); at != std::string::npos; at = text.find("\"E\"", at)) text.replace(at, 3, "\"V\"");
  write_file_atomically(dir / "ctn.model.json", text);
  TreeConfig config;
  config.model = dir / "ctn.model.json";
  config.data_dir = dir.path();
  config.batch_trees = 8;
  config.eval_samples = 1;
  config.epochs = 1;
  config.freeze_words_epochs = 1;
  TrainObserver quiet;
  train_trees(config, data, dir / "run", quiet);
  Model start = load_model(config.model);
  start.values = std::make_shared<ParamStore<float>>(start.graph);
  start.values->initialize(start.graph, config.init_seed);
  const Model trained = load_model(dir / "run/model.json");
  REQUIRE(trained.values->find("V"));
  CHECK_FALSE(trained.values->find("E"));
  const auto same = [&](const char* name) {
    const TensorView<const float> a = start.values->value(name), b = trained.values->value(name);
    for (int64_t i = 0; i < a.size(); ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  };
  CHECK(same("V"));       // frozen for the run's one epoch
  CHECK_FALSE(same("T"));  // trained
  // A table of the wrong size is named, whatever its name.
  TreeData other = make_treebank(dir, 40, 10, 10, 22);
  other.vocabulary = Vocabulary::from_trees(other.bank.train, {.min_count = 100});
  CHECK_THROWS_WITH_AS(train_trees(config, other, dir / "run2", quiet),
                       doctest::Contains("V has 9 rows but the vocabulary of"), Error);
}

TEST_CASE("the optimizer restarts at the configured epochs; a run resumed at a restart ends as an unbroken one") {
  TempDir dir;
  const TreeData data = make_treebank(dir, 40, 10, 10, 9);
  save_model(build_ctn({.vocabulary = data.vocabulary.size(), .dim = 5, .classes = 5}), dir / "ctn.model.json");
  TreeConfig config;
  config.model = dir / "ctn.model.json";
  config.data_dir = dir.path();
  config.batch_trees = 8;
  config.eval_samples = 1;
  config.epochs = 3;
  config.optimizer_settings.set("epsilon", 1e-3);
  config.optimizer_settings.set("initial_accumulator", 1e-3);
  TrainObserver quiet;
  const auto final_values = [&](const std::string& run) {
    const Model m = load_model(dir / (run + "/model.json"));
    return std::vector<float>(m.values->values().begin(), m.values->values().end());
  };
  train_trees(config, data, dir / "never", quiet);
  config.restart_every_epochs = 2;
  train_trees(config, data, dir / "every2", quiet);
  config.restart_before_epoch = 2;  // the restart at epoch 2 is not before epoch 2
  train_trees(config, data, dir / "before2", quiet);
  config.restart_before_epoch = 0;
  config.epochs = 2;
  train_trees(config, data, dir / "resumed", quiet);
  config.epochs = 3;
  train_trees(config, data, dir / "resumed", quiet, true);
  CHECK(final_values("every2") != final_values("never"));
  CHECK(final_values("before2") == final_values("never"));
  CHECK(final_values("resumed") == final_values("every2"));
  const TreeConfig read = parse_tree_config(
      nlohmann::json::parse(R"({"model": "m.json", "task": "fine", "optimizer": {"kind": "adagrad",
        "learning_rate": 0.01, "epsilon": 0.001, "restart_every_epochs": 9, "restart_before_epoch": 250}})"),
      "cfg.json");
  CHECK(read.restart_every_epochs == 9);
  CHECK(read.restart_before_epoch == 250);
  CHECK(read.optimizer_settings.get_float("epsilon") == 0.001);
  const TreeConfig again = parse_tree_config(to_json(read), "again");
  CHECK(again.restart_every_epochs == 9);
  CHECK(again.restart_before_epoch == 250);

  // A tree config's model_patch is read, written back, and applied by the tree trainer.
  config.model_patch = R"([{"op": "replace", "path": "/tree/scores", "value": "nope"}])";
  CHECK(parse_tree_config(to_json(config), "again").model_patch == nlohmann::json::parse(config.model_patch).dump());
  CHECK_THROWS_WITH_AS(train_trees(config, data, dir / "patched", quiet),
                       doctest::Contains("ctn.model.json with the config's model_patch"), Error);
}

TEST_CASE("a tree config's optimizer groups: the word vectors on SGD of their own, checkpointed, resumed") {
  TempDir dir;
  const TreeData data = make_treebank(dir, 40, 10, 10, 9);
  save_model(build_ctn({.vocabulary = data.vocabulary.size(), .dim = 5, .classes = 5}), dir / "ctn.model.json");
  const TreeConfig config = parse_tree_config(nlohmann::json::parse(cat(R"({"model": ")", dir / "ctn.model.json",
      R"(", "task": "fine", "data": {"dir": ")", dir.path(), R"("}, "batch": {"trees": 8}, "run": {"epochs": 3},
      "eval": {"samples": 1}, "optimizer": {"kind": "adagrad", "learning_rate": 0.05,
        "groups": [{"params": ["E"], "kind": "sgd", "learning_rate": 0.1}]}})")), "cfg.json");
  REQUIRE(config.optimizer_groups.size() == 1);
  CHECK(config.optimizer_groups[0].params == std::vector<std::string>{"E"});
  CHECK(parse_tree_config(to_json(config), "again").optimizer_groups == config.optimizer_groups);
  TrainObserver quiet;
  const auto final_values = [&](const std::string& run) {
    const Model m = load_model(dir / (run + "/model.json"));
    return std::vector<float>(m.values->values().begin(), m.values->values().end());
  };
  train_trees(config, data, dir / "grouped", quiet);
  TreeConfig all_adagrad = config;
  all_adagrad.optimizer_groups.clear();
  train_trees(all_adagrad, data, dir / "plain", quiet);
  CHECK(final_values("grouped") != final_values("plain"));
  // Resumed from its checkpoint after epoch 2 (the group's velocity restored by name).
  TreeConfig two = config;
  two.epochs = 2;
  train_trees(two, data, dir / "resumed", quiet);
  train_trees(config, data, dir / "resumed", quiet, true);
  CHECK(final_values("resumed") == final_values("grouped"));
  // A group naming no parameter of the model stops the run before it trains.
  TreeConfig wrong = config;
  wrong.optimizer_groups[0].params = {"words"};
  CHECK_THROWS_WITH_AS(train_trees(wrong, data, dir / "wrong", quiet),
                       doctest::Contains("optimizer.groups[0].params: the model has no parameter 'words'"), Error);
  CHECK_THROWS_WITH_AS(parse_tree_config(nlohmann::json::parse(
                           R"({"model": "m.json", "task": "fine", "optimizer": {"groups": [{"params": ["E"]}]}})"),
                           "cfg.json"),
                       doctest::Contains("optimizer.groups[0].kind"), Error);
}

TEST_CASE("a tree config's data section sets the vocabulary policy, and a wrong type is named") {
  const auto parse = [](const std::string& data) {
    return parse_tree_config(nlohmann::json::parse(R"({"model": "m.json", "task": "fine", "data": )" + data + "}"),
                             "cfg.json");
  };
  const TreeConfig read = parse(R"({"min_count": 2, "lowercase": true})");
  CHECK(read.vocabulary.min_count == 2);
  CHECK(read.vocabulary.lowercase);
  const TreeConfig again = parse_tree_config(to_json(read), "again");
  CHECK(again.vocabulary.min_count == 2);
  CHECK(again.vocabulary.lowercase);
  CHECK_FALSE(parse("{}").vocabulary.lowercase);
  CHECK_THROWS_WITH_AS(parse(R"({"lowercase": "yes"})"), doctest::Contains("data.lowercase"), Error);
}

// The table of docs/trees.md: "`a.b`, `.c`" names fields a.b and a.c.
std::vector<std::pair<std::vector<std::string>, std::string>> documented_tree_fields() {
  const std::string page = read_file(pens::testing::source_dir() + "/docs/trees.md", 1 << 20);
  const size_t heading = page.find("### The config, field by field");
  REQUIRE(heading != std::string::npos);
  std::istringstream lines(page.substr(page.find("|---|", heading)));
  std::vector<std::pair<std::vector<std::string>, std::string>> rows;
  std::string line;
  std::getline(lines, line);  // the rule under the header
  while (std::getline(lines, line) && line.rfind("| `", 0) == 0) {
    const size_t first_end = line.find(" | ", 2), second_end = line.find(" | ", first_end + 3);
    std::vector<std::string> names;
    std::string prefix;
    const std::string column = line.substr(2, first_end - 2);
    for (size_t at = column.find('`'); at != std::string::npos; at = column.find('`', column.find('`', at + 1) + 1)) {
      std::string name = column.substr(at + 1, column.find('`', at + 1) - at - 1);
      if (name.front() == '.') name = prefix + name;
      prefix = name.find('.') == std::string::npos ? "" : name.substr(0, name.find('.'));
      names.push_back(name);
    }
    rows.emplace_back(names, line.substr(first_end + 3, second_end - first_end - 3));
  }
  return rows;
}

// A config's fields as dotted paths, with their values.
void flatten(const nlohmann::json& j, const std::string& prefix, std::map<std::string, nlohmann::json>& out) {
  for (const auto& [key, value] : j.items()) {
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    if (value.is_object() && key != "l2") {
      flatten(value, path, out);
    } else {
      out[path] = value;
    }
  }
}

TEST_CASE("docs/trees.md's config table names every field the parser reads, with its default") {
  std::map<std::string, nlohmann::json> fields;
  flatten(to_json(parse_tree_config(nlohmann::json{{"model", "m.json"}, {"task", "fine"}}, "c.json")), "", fields);
  // Optional: written only when a config gives them.
  fields["lambda_schedule"] = nullptr;
  fields["optimizer.groups"] = nullptr;
  fields["model_patch"] = nullptr;
  std::set<std::string> documented;
  int defaults_checked = 0;
  for (const auto& [names, defaults] : documented_tree_fields()) {
    // "1e-8, 0": one default per name, where the column lists them.
    std::vector<std::string> values;
    std::istringstream in(defaults);
    for (std::string v; std::getline(in, v, ',');) values.push_back(v.substr(v.find_first_not_of(' ')));
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string name = names[i] == "l2.NAME" ? "l2" : names[i];
      INFO(name);
      CHECK_MESSAGE(fields.count(name) == 1, "docs/trees.md documents a field the parser does not read: " << name);
      documented.insert(name);
      if (values.size() != names.size() || !fields.count(name) || fields[name].is_null()) continue;
      if (values[i].front() == '(') continue;  // "(required)"
      std::string shown = values[i].substr(0, values[i].find(" ("));  // "0 (none)"
      if (shown.size() > 1 && shown.front() == '`') shown = shown.substr(1, shown.size() - 2);
      const nlohmann::json& actual = fields[name];
      if (actual.is_number()) {
        CHECK(std::stod(shown) == doctest::Approx(actual.get<double>()));
      } else if (actual.is_boolean()) {
        CHECK(shown == (actual.get<bool>() ? "true" : "false"));
      } else if (actual.is_string()) {
        CHECK(shown == (actual.get<std::string>().empty() ? "\"\"" : actual.get<std::string>()));
      } else {
        continue;
      }
      ++defaults_checked;
    }
  }
  for (const auto& field : fields) {  // not a structured binding: clang 14's CHECK cannot capture one
    const std::string& name = field.first;
    CHECK_MESSAGE(documented.count(name) == 1, "docs/trees.md's config table lacks the field " << name);
  }
  CHECK(defaults_checked >= 20);
}

// The page teaches writing a tree architecture from the shipped file, laid out one entry a
// line where the file is in pens' canonical form (pens fmt): the two must be one model.
TEST_CASE("docs/trees.md shows the shipped Tree-LSTM model file: the same model, written by pens as the file is") {
  const std::string shipped = pens::testing::source_dir() + "/examples/sst/tree-lstm.model.json";
  const std::string page = read_file(pens::testing::source_dir() + "/docs/trees.md", 1 << 20);
  const size_t section = page.find("## A new architecture as a model file");
  REQUIRE(section != std::string::npos);
  const size_t begin = page.find("```json\n", section);
  REQUIRE(begin != std::string::npos);
  const size_t end = page.find("```\n", begin + 8);
  REQUIRE(end != std::string::npos);
  pens::testing::TempDir dir;
  std::ofstream(dir / "shown.model.json") << page.substr(begin + 8, end - begin - 8);
  const std::string canonical = write_model(load_model(dir / "shown.model.json"), ValueStorage::None, "").json;
  CHECK(canonical == read_file(shipped, 1 << 20));
  CHECK(canonical.find("\"tree\"") != std::string::npos);
}

TEST_CASE("skip-gram pre-training lowers its loss and leaves word vectors of the configured spread") {
  TempDir dir;
  const TreeData data = make_treebank(dir, 150, 20, 5, 9);
  SkipgramConfig config;
  config.data_dir = dir.path();
  config.dim = 8;
  config.window = 2;
  config.batch = 32;
  config.learning_rate = 0.1;
  config.epochs = 3;
  TrainObserver quiet;
  const TrainSummary s = pretrain_word_vectors(config, data, dir / "sg", quiet);
  CHECK(s.json["status"] == "finished");
  std::ifstream metrics(dir / "sg/metrics.jsonl");
  std::vector<double> losses;
  for (std::string line; std::getline(metrics, line);) losses.push_back(nlohmann::json::parse(line)["objective"]);
  REQUIRE(losses.size() == 3);
  CHECK(losses[2] < losses[0]);
  // No error to draw: the learning curve is the objective's (where gnuplot is installed).
  if (std::system("command -v gnuplot >/dev/null") == 0) CHECK(std::filesystem::exists(dir / "sg/learning-curve.png"));
  CHECK(read_file(dir / "sg/curve.gp", 1 << 16).find("objective by epoch") != std::string::npos);
  const Model m = load_model(dir / "sg/model.json");
  const auto E = m.values->value("E");
  const double mean = E.arr().cast<double>().mean();
  CHECK(std::sqrt((E.arr().cast<double>() - mean).square().mean()) == doctest::Approx(0.5).epsilon(1e-4));
  // Resumed from a checkpoint in the middle of an epoch, the run ends as the unbroken one:
  // the negatives' generator is advanced past the steps already taken.
  config.checkpoint_every_epochs = 0.5;
  config.checkpoint_keep = 10;
  pretrain_word_vectors(config, data, dir / "unbroken", quiet);
  std::filesystem::create_directories(dir / "resumed");
  const auto kept = RunFolder(dir / "unbroken").kept_checkpoints();
  REQUIRE(kept.size() >= 3);
  const std::string middle = kept[0].second;  // half-way through the first epoch
  const TrainSummary resumed = pretrain_word_vectors(config, data, dir / "resumed", quiet, Resume(middle));
  CHECK(resumed.json["status"] == "finished");
  CHECK(read_file(dir / "resumed/metrics.jsonl", 1 << 20).size() > 0);
  const Model a = load_model(dir / "unbroken/model.json"), b = load_model(dir / "resumed/model.json");
  const auto ea = a.values->value("E"), eb = b.values->value("E");
  for (int64_t i = 0; i < ea.size(); ++i) REQUIRE(ea[i] == eb[i]);
  // Every CPU by default, as every kind of run: the vectors do not depend on the count.
  CHECK(SkipgramConfig{}.threads == 0);
  for (const int threads : {1, 3}) {
    config.threads = threads;
    pretrain_word_vectors(config, data, dir / cat("threads", threads), quiet);
  }
  const Model one = load_model(dir / "threads1/model.json"), three = load_model(dir / "threads3/model.json");
  CHECK(std::ranges::equal(one.values->values(), three.values->values()));

  // A tree model starts from them: E has the same rows.
  TreeConfig tree;
  tree.model = dir / "ctn.model.json";
  save_model(build_ctn({.vocabulary = data.vocabulary.size(), .dim = 8}), tree.model);
  tree.init_from = dir / "sg/model.json";
  tree.data_dir = dir.path();
  tree.epochs = 1;
  tree.freeze_words_epochs = 1;
  train_trees(tree, data, dir / "run", quiet);
  const Model trained = load_model(dir / "run/model.json");
  const auto E2 = trained.values->value("E");
  for (int64_t i = 0; i < E.size(); ++i) REQUIRE(E2[i] == E[i]);  // frozen for the one epoch
}

// A PEA penalty on trees with the model's lambda_schedule: at scale 0 the penalty adds
// nothing, so an epoch trains exactly what λ = 0 trains (the same children, the same
// noise), and not what λ = 1 trains; the metrics report the scale.
TEST_CASE("a tree model's penalty weight follows its lambda_schedule") {
  TempDir dir;
  const TreeData data = make_treebank(dir, 40, 10, 10, 9);
  const auto model_with = [&](double lambda, std::vector<LambdaStage> stages, const std::string& name) {
    Model m = build_ctn({.vocabulary = data.vocabulary.size(), .dim = 6, .classes = 2, .subspace = 3});
    m.ensemble->children = 2;
    m.ensemble->penalties = {{.node = "scores", .kind = "kl", .lambda = lambda, .rows = "all"}};
    m.ensemble->lambda_schedule = std::move(stages);
    save_model(m, dir / name);
    return dir / name;
  };
  TreeConfig config;
  config.task = "binary";
  config.data_dir = dir.path();
  config.batch_trees = 8;
  config.eval_samples = 2;
  config.epochs = 1;
  TrainObserver quiet;
  const auto trained = [&](const std::string& model, const std::string& out) {
    config.model = model;
    train_trees(config, data, dir / out, quiet);
    return load_model(dir / (out + "/model.json"));
  };
  const std::vector<LambdaStage> off_then_on = {{.epochs = 1, .scale = 0}, {.epochs = 1, .scale = 1}};
  const Model scaled_off = trained(model_with(1.0, off_then_on, "a.json"), "a");
  const Model zero = trained(model_with(0.0, {}, "b.json"), "b");
  const Model full = trained(model_with(1.0, {}, "c.json"), "c");
  // The config's schedule replaces the model's (none here).
  config.lambda_schedule = off_then_on;
  const Model configured_off = trained(dir / "c.json", "d");
  config.lambda_schedule.reset();
  bool differs_from_full = false;
  for (const ParamEntry& e : zero.values->entries()) {
    const TensorView<const float> x = scaled_off.values->value(e.name), y = zero.values->value(e.name);
    const TensorView<const float> z = full.values->value(e.name), w = configured_off.values->value(e.name);
    for (int64_t i = 0; i < x.size(); ++i) {
      REQUIRE(x[i] == y[i]);
      REQUIRE(w[i] == y[i]);
      differs_from_full = differs_from_full || x[i] != z[i];
    }
  }
  CHECK(differs_from_full);

  // A schedule with nothing to scale is refused.
  save_model(build_ctn({.vocabulary = data.vocabulary.size(), .dim = 6, .classes = 2, .subspace = 3}), dir / "e.json");
  config.model = dir / "e.json";
  config.lambda_schedule = off_then_on;
  CHECK_THROWS_WITH_AS(train_trees(config, data, dir / "e", quiet), doctest::Contains("no pseudo-ensemble penalty"),
                       Error);
  config.lambda_schedule.reset();

  // Two epochs: the scale of each epoch's steps in its metrics line.
  config.epochs = 2;
  trained(dir / "a.json", "a2");
  std::ifstream metrics(dir / "a2/metrics.jsonl");
  std::vector<double> scales;
  for (std::string line; std::getline(metrics, line);) scales.push_back(nlohmann::json::parse(line).at("lambda_scale"));
  CHECK(scales == std::vector<double>{0.0, 1.0});
}

TEST_CASE("a tree config's lambda_schedule reads as stages, and a bad stage is named") {
  const auto parse = [](const std::string& rest) {
    return parse_tree_config(nlohmann::json::parse(R"({"model": "m.json", "task": "binary")" + rest + "}"), "cfg.json");
  };
  const TreeConfig c = parse(R"(, "lambda_schedule": [{"epochs": 2, "scale": 0}, {"epochs": 1, "scale": 1}])");
  REQUIRE(c.lambda_schedule);
  CHECK(*c.lambda_schedule == std::vector<LambdaStage>{{.epochs = 2, .scale = 0}, {.epochs = 1, .scale = 1}});
  CHECK(parse_tree_config(to_json(c), "again").lambda_schedule == c.lambda_schedule);
  CHECK_FALSE(parse("").lambda_schedule);
  CHECK_THROWS_WITH_AS(parse(R"(, "lambda_schedule": {"epochs": 1})"),
                       doctest::Contains("lambda_schedule must be an array"), Error);
  CHECK_THROWS_WITH_AS(parse(R"(, "lambda_schedule": [{"epochs": 0}])"), doctest::Contains("lambda_schedule[0]"), Error);
}

TEST_CASE("a run's effective config names its files absolutely, so a resume may spell them another way") {
  TempDir dir;
  const TreeData data = make_treebank(dir, 30, 5, 5, 9);
  save_model(build_ctn({.vocabulary = data.vocabulary.size(), .dim = 4, .classes = 2}), dir / "ctn.model.json");
  std::filesystem::create_directories(dir / "configs");
  const auto config_file = [&](const std::string& name, const std::string& model) {
    const nlohmann::json c = {{"task", "binary"}, {"model", model}, {"data", {{"dir", dir.path()}}},
                              {"batch", {{"trees", 10}}}, {"run", {{"epochs", 1}}}};
    write_file_atomically(dir / name, c.dump());
    return dir / name;
  };
  // The model relative to the config's folder: absolute in the run folder's config.json.
  RunOptions options;
  options.out = dir / "run";
  const PreparedRun run = prepare_run(config_file("configs/c.json", "../ctn.model.json"), options);
  const std::string model = std::filesystem::path(dir / "ctn.model.json").lexically_normal().string();
  CHECK(run.task_as<PreparedTrees>().config.model == model);
  TrainObserver quiet;
  run_training(run, quiet);
  CHECK(nlohmann::json::parse(read_file(dir / "run/config.json", 1 << 20))["model"] == model);
  // The same file by another path, in a config elsewhere: the resume is accepted.
  options.epochs = 2;
  options.resume = true;
  const PreparedRun again = prepare_run(config_file("c2.json", "ctn.model.json"), options);
  CHECK(run_training(again, quiet).json["epochs"].get<double>() == doctest::Approx(2));
  // Another model file is refused, by its absolute path, and the folder keeps its config.
  std::filesystem::copy_file(dir / "ctn.model.json", dir / "other.model.json");
  options.epochs = 3;
  const PreparedRun other = prepare_run(config_file("c3.json", "other.model.json"), options);
  CHECK_THROWS_WITH_AS(run_training(other, quiet), doctest::Contains("other.model.json\" now"), Error);
  CHECK(nlohmann::json::parse(read_file(dir / "run/config.json", 1 << 20))["model"] == model);
}

TEST_CASE("a tree config's word_vectors start the word table from a vectors file named from the config's folder") {
  TempDir dir;
  const TreeData data = make_treebank(dir, 30, 5, 5, 9);
  save_model(build_ctn({.vocabulary = data.vocabulary.size(), .dim = 3, .classes = 2}), dir / "ctn.model.json");
  std::filesystem::create_directories(dir / "configs");
  write_file_atomically(dir / "vectors.txt", "good 0.5 -1 2\nthe 0.25 0.125 4\nunused 1 1 1\n");
  const nlohmann::json c = {{"task", "binary"},        {"model", "../ctn.model.json"},
                            {"data", {{"dir", ".."}}}, {"word_vectors", "../vectors.txt"},
                            {"batch", {{"trees", 10}}}, {"freeze_words_epochs", 1},
                            {"run", {{"epochs", 1}}}};
  write_file_atomically(dir / "configs/c.json", c.dump());
  RunOptions options;
  options.out = dir / "run";
  const PreparedRun run = prepare_run(dir / "configs/c.json", options);
  const std::string vectors = std::filesystem::path(dir / "vectors.txt").lexically_normal().string();
  CHECK(run.task_as<PreparedTrees>().config.word_vectors == vectors);
  struct Messages : TrainObserver {
    std::string all;
    void on_message(const std::string& line) override { all += line + "\n"; }
  } observer;
  run_training(run, observer);
  CHECK(observer.all.find("word vectors: 2 of the 8 words of E from " + vectors) != std::string::npos);
  CHECK(nlohmann::json::parse(read_file(dir / "run/config.json", 1 << 20))["word_vectors"] == vectors);
  // Held for the one epoch: E is the file's rows for its words.
  const Model trained = load_model(dir / "run/model.json");
  const auto E = trained.values->value("E");
  const auto row = [&](const std::string& word) {
    const int64_t id = data.vocabulary.id(word);
    return std::vector<float>{E[id * 3], E[id * 3 + 1], E[id * 3 + 2]};
  };
  CHECK(row("good") == std::vector<float>{0.5f, -1.0f, 2.0f});
  CHECK(row("the") == std::vector<float>{0.25f, 0.125f, 4.0f});
  CHECK(row("film") != std::vector<float>{0.0f, 0.0f, 0.0f});  // its initial value

  // A model whose word table is not as wide as the vectors is refused before training.
  save_model(build_ctn({.vocabulary = data.vocabulary.size(), .dim = 4, .classes = 2}), dir / "ctn.model.json");
  options.out = dir / "run4";
  CHECK_THROWS_WITH_AS(run_training(prepare_run(dir / "configs/c.json", options), observer),
                       doctest::Contains("vectors of 3 values, but the word table has 4 columns"), Error);
}

namespace {
// The working directory for one scope: the path rule's other half.
class WorkingDirectory {
 public:
  explicit WorkingDirectory(const std::string& to) : was_(std::filesystem::current_path()) {
    std::filesystem::current_path(to);
  }
  ~WorkingDirectory() { std::filesystem::current_path(was_); }
  WorkingDirectory(const WorkingDirectory&) = delete;
  WorkingDirectory& operator=(const WorkingDirectory&) = delete;

 private:
  std::filesystem::path was_;
};
}  // namespace

TEST_CASE("one rule for paths: written in a config, from its folder; on the command line or left out, from the working directory") {
  TempDir dir;
  make_treebank(dir, 30, 5, 5, 9);
  save_model(build_ctn({.vocabulary = 9, .dim = 4, .classes = 2}), dir / "ctn.model.json");
  std::filesystem::create_directories(dir / "configs");
  const WorkingDirectory in(dir.path());
  const std::string here = std::filesystem::path(dir.path()).lexically_normal().string();
  const std::string config = "configs/c.json";
  const auto written = [](const std::string& data_dir) { return nlohmann::json{{"data", {{"dir", data_dir}}}}; };

  CHECK(configured_data_dir(config, written(".."), "..") == here);
  CHECK(configured_data_dir(config, written(here), here) == here);
  CHECK(configured_data_dir(config, written("nowhere"), "nowhere") == here + "/configs/nowhere");  // the loader says
  CHECK(configured_data_dir(config, nlohmann::json::object(), ".") == here);                         // the default
  CHECK(relative_to_config(config, "../ctn.model.json") == here + "/ctn.model.json");
  // As read before: a folder in the working directory, none beside the config. Refused,
  // with what to write instead.
  std::filesystem::create_directories(dir / "sst");
  CHECK_THROWS_WITH_AS(configured_data_dir(config, written("sst"), "sst"),
                       doctest::Contains("configs/c.json: data.dir \"sst\" is read from the config's folder"), Error);
  CHECK_THROWS_WITH_AS(configured_data_dir(config, written("sst"), "sst"), doctest::Contains("write \"../sst\""),
                       Error);
  // ... or --data-dir, as the message says: the command line's folder, from here.
  CHECK(configured_data_dir(config, written("sst"), "sst", "sst") == here + "/sst");

  // Through prepare_run: the config's data.dir from configs/, --data-dir from here.
  const nlohmann::json c = {{"task", "binary"}, {"model", "../ctn.model.json"}, {"data", {{"dir", ".."}}}};
  write_file_atomically(dir / config, c.dump());
  RunOptions options;
  options.out = "run";
  CHECK(prepare_run(config, options).task_as<PreparedTrees>().config.data_dir == here);
  options.data_dir = ".";
  CHECK(prepare_run(config, options).task_as<PreparedTrees>().config.data_dir == here);
  CHECK(prepare_run(config, options).out_dir == "run");  // made absolute where the run writes its config
}

}  // namespace test_tree_trainer
