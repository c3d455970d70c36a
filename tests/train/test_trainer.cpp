// The trainer end to end on a small synthetic task: a short semi-supervised
// pseudo-ensemble run lowers validation error and leaves a well-formed run folder; a
// NaN stops the run with a clear message and a good checkpoint; configs are checked.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "pens/models/mlp.h"
#include "pens/models/synthetic.h"
#include "pens/serialization/checkpoint.h"
#include "pens/serialization/files.h"
#include "pens/serialization/model_file.h"
#include "pens/train/config/config_file.h"
#include "pens/train/config/pretrain_config.h"
#include "pens/train/config/tree_config.h"
#include "pens/train/loop/report.h"
#include "pens/train/loop/run.h"
#include "pens/train/loop/run_folder.h"
#include "pens/train/optim/optimizer.h"
#include "pens/train/tasks/skipgram.h"
#include "pens/train/tasks/trainer.h"
#include "tests/support/helpers.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"

namespace test_trainer {

using namespace pens;
using nlohmann::json;

namespace {

// A 16-32-32-4 dropout network with V^t between two children, saved untrained; its
// incoming weights bounded by max-norm unless max_norm is 0.
std::string write_small_model(const testing::TempDir& dir, double max_norm = 3.5) {
  Model m;
  m.graph = build_mlp({.layers = {16, 32, 32, 4}, .weight_std = 0.3, .max_norm = max_norm, .mask_input = 0.1, .mask_hidden = 0.2});
  m.ensemble = PseudoEnsembleSpec{.children = 2, .loss_on = "child", .penalties = {{"logits", "tanh", 1.0, "all"}}, .lambda_schedule = {}};
  const std::string path = dir / "small.model.json";
  save_model(m, path, ValueStorage::None);
  return path;
}

TrainConfig small_config(const std::string& model) {
  TrainConfig c;
  c.model = model;
  c.labeled = 200;
  c.validation = 200;
  c.batch_labeled = 16;
  c.batch_unlabeled = 16;
  c.schedule.warmup_epochs = 0;
  c.schedule.decay = 1;
  c.schedule.momentum_start = c.schedule.momentum_end = 0.9;
  c.epochs = 6;
  c.steps_per_epoch = 50;
  c.threads = 1;
  c.eval_batch = 64;
  return c;
}

TrainData small_data() { return {make_teacher_task(1200, 16, 4, 1), make_teacher_task(400, 16, 4, 2)}; }

struct Quiet : TrainObserver {
  std::vector<std::string> messages;
  void on_message(const std::string& text) override { messages.push_back(text); }
};

// The evaluations in a run folder's metrics.jsonl.
std::vector<json> metrics_of(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

// Rewrites the JSON header of the checkpoint at `path` with `edit`, keeping its payload.
void edit_checkpoint_header(const std::string& path, const std::function<void(json&)>& edit) {
  const std::string bytes = read_file(path, 1 << 24);
  const size_t newline = bytes.find('\n');
  json header = json::parse(bytes.substr(0, newline));
  edit(header);
  write_file_atomically(path, header.dump() + bytes.substr(newline));
}

// Trains the small config for 2 epochs into dir/run, a checkpoint after each; its config.
TrainConfig two_epochs_into_run(const testing::TempDir& dir) {
  TrainConfig config = small_config(write_small_model(dir));
  config.epochs = 2;
  config.checkpoint_every_epochs = 1;
  Quiet quiet;
  train(config, small_data(), dir / "run", quiet);
  return config;
}

// Trains `config` for 4 epochs into dir/unbroken, and for 2 epochs then resumed to 4 into
// dir/resumed, and checks that both end with the same parameters, bit for bit.
TrainSummary check_resume_is_exact(TrainConfig config, const testing::TempDir& dir) {
  config.checkpoint_every_epochs = 1;
  config.epochs = 4;
  Quiet quiet;
  const TrainSummary unbroken = train(config, small_data(), dir / "unbroken", quiet);
  config.epochs = 2;
  train(config, small_data(), dir / "resumed", quiet);
  config.epochs = 4;
  config.description = "resumed under another description";  // free text: a resume may change it
  train(config, small_data(), dir / "resumed", quiet, /*resume=*/true);
  const Model a = load_model(dir / "unbroken/model.json");
  const Model b = load_model(dir / "resumed/model.json");
  REQUIRE(a.values);
  REQUIRE(b.values);
  const auto va = a.values->values(), vb = b.values->values();
  CHECK(std::equal(va.begin(), va.end(), vb.begin(), vb.end()));
  return unbroken;
}

}  // namespace

TEST_CASE("a short semi-supervised run lowers validation error and writes a well-formed run folder") {
  testing::TempDir dir;
  const TrainConfig config = small_config(write_small_model(dir));
  Quiet quiet;
  const TrainSummary summary = train(config, small_data(), dir / "run", quiet);
  REQUIRE_FALSE(summary.diverged);

  const std::vector<json> lines = metrics_of(dir / "run/metrics.jsonl");
  REQUIRE(lines.size() == 6);
  for (size_t i = 0; i < lines.size(); ++i) {
    const json& m = lines[i];
    CHECK(m["step"] == 50 * static_cast<int64_t>(i + 1));
    CHECK(m["epoch"].get<double>() == doctest::Approx(static_cast<double>(i + 1)));
    for (const char* key : {"objective", "train_error", "validation_error", "test_error", "examples_per_second",
                            "learning_rate", "momentum", "lambda_scale", "elapsed_seconds"}) {
      CHECK_MESSAGE(m[key].is_number(), key);
    }
    // One entry per loss term: the supervised loss on child 1 and the V^t penalty.
    CHECK(m["losses"].size() == 2);
    CHECK(m["losses"].contains("pen/logits/tanh"));
    CHECK(std::isfinite(m["objective"].get<double>()));
  }
  const double first = lines.front()["validation_error"], last = lines.back()["validation_error"];
  INFO("validation error after epoch 1: " << first << ", after epoch 6: " << last);
  CHECK(last < first);
  CHECK(last < 0.5);  // chance is 0.75 on 4 classes

  const json s = json::parse(read_file(dir / "run/summary.json", 1 << 20));
  CHECK(s["status"] == "finished");
  CHECK(s["steps"] == 300);
  CHECK(s["labeled"] == 200);
  CHECK(s["validation"] == 200);
  CHECK(s["unlabeled"] == 800);
  CHECK(s["config_hash"].get<std::string>().size() == 16);
  CHECK(s["test_error"].is_number());
  CHECK(s["best_validation"]["validation_error"].get<double>() <= last);
  CHECK(s["final"]["test_error"] == lines.back()["test_error"]);

  // The trained model reads back with its values, and the filters picture is a PNG.
  const Model trained = load_model(dir / "run/model.json");
  REQUIRE(trained.values);
  CHECK(read_file(dir / "run/filters.png", 1 << 20).substr(1, 3) == "PNG");
}

TEST_CASE("a NaN stops training with a message and leaves the last good checkpoint") {
  testing::TempDir dir;
  TrainConfig config = small_config(write_small_model(dir));
  config.checkpoint_every_epochs = 1.0 / 50;  // every step
  TrainData data = small_data();
  // Poisons the data after step 5: step 6 sees NaN inputs.
  struct Poison : Quiet {
    Dataset* train = nullptr;
    void on_step(int64_t step, int64_t, double, double, double) override {
      if (step == 5) std::fill(train->x.begin(), train->x.end(), std::nanf(""));
    }
  } poison;
  poison.train = &data.train;
  const TrainSummary summary = train(config, data, dir / "run", poison);
  CHECK(summary.diverged);
  CHECK(summary.json["status"] == "diverged");
  const std::string message = summary.json["message"];
  CHECK(message.find("diverged at step 5") != std::string::npos);
  CHECK(message.find("nan") != std::string::npos);
  bool named_checkpoint = false;
  for (const std::string& m : poison.messages) named_checkpoint |= m.find("checkpoint.pens (step 5)") != std::string::npos;
  CHECK(named_checkpoint);

  Model model = load_model(write_small_model(dir));
  ParamStore<float> params(model.graph);
  const auto sgd = make_optimizer("sgd", params);
  const TrainingState state = load_checkpoint(dir / "run/checkpoint.pens", params, sgd->checkpoint_state());
  CHECK(state.step == 5);
  for (float v : params.values()) REQUIRE(std::isfinite(v));
}

TEST_CASE("a run that diverges names where, keeps its checkpoints, and rolls back to one with a lower learning rate") {
  testing::TempDir dir;
  // No max-norm, so nothing bounds the weights; the learning rate warms up to 1000 over
  // the run, and the weights grow until a value overflows (at step 115 in the optimized
  // build, 19 in the sanitizer build: the growth is chaotic, so nothing here depends on
  // the step). A checkpoint after every step, all kept.
  TrainConfig config = small_config(write_small_model(dir, 0));
  config.schedule.learning_rate = 1e3;
  config.schedule.warmup_epochs = 6;
  config.checkpoint_every_epochs = 1.0 / 50;
  config.checkpoint_keep = 1000;
  Quiet quiet;
  const TrainSummary diverged = train(config, small_data(), dir / "run", quiet);
  REQUIRE(diverged.diverged);
  const std::string message = diverged.json["message"];
  INFO(message);
  CHECK(message.find("training diverged at step ") != std::string::npos);
  CHECK(message.find("the first non-finite value is at '") != std::string::npos);
  const int64_t failed_at = diverged.json["steps"];
  REQUIRE(failed_at > 2);

  // Every checkpoint before the divergence is kept, each one a file that loads.
  RunFolder folder(dir / "run");
  const auto kept = folder.kept_checkpoints();
  REQUIRE(kept.size() == static_cast<size_t>(failed_at));
  Model model = load_model(dir / "small.model.json");
  ParamStore<float> params(model.graph);
  const auto sgd = make_optimizer("sgd", params);
  for (const auto& [step, file] : kept) CHECK(load_checkpoint(file, params, sgd->checkpoint_state()).step == step);
  bool named = false;
  for (const std::string& m : quiet.messages) named |= m.find("earlier ones: checkpoint-") != std::string::npos;
  CHECK(named);

  // Rolled back to step 1, with a learning rate 10^4 times lower, the run trains to the
  // end, and the summary says what changed.
  config.schedule.learning_rate = 0.1;
  const TrainSummary resumed = train(config, small_data(), dir / "run", quiet, Resume(kept.front().second));
  CHECK_FALSE(resumed.diverged);
  CHECK(resumed.json["steps"] == 300);
  CHECK(resumed.json["changed_on_resume"]["step"] == 1);
  CHECK(resumed.json["changed_on_resume"]["settings"]["optimizer.learning_rate"] == json::array({1000.0, 0.1}));
  bool said = false;
  for (const std::string& m : quiet.messages) said |= m.find("changed on resume: optimizer.learning_rate 1000.0 -> 0.1") != std::string::npos;
  CHECK(said);
  CHECK(resumed.json["final"]["validation_error"].get<double>() < 0.5);  // chance is 0.75
  // The checkpoints of the abandoned steps went with the roll-back; the new run's are kept.
  for (const auto& [step, file] : folder.kept_checkpoints()) CHECK(load_checkpoint(file, params, sgd->checkpoint_state()).step == step);
  CHECK(folder.kept_checkpoints().size() == 300);
}

TEST_CASE("a run folder keeps its last checkpoints by step, as second names of one file, and rolls back") {
  testing::TempDir dir;
  const Model model = load_model(write_small_model(dir));
  ParamStore<float> params(model.graph);
  const auto sgd = make_optimizer("sgd", params);
  const auto steps = [](const RunFolder& f) {
    std::vector<int64_t> out;
    for (const auto& [step, file] : f.kept_checkpoints()) out.push_back(step);
    return out;
  };
  RunFolder folder(dir / "run", 3);
  for (int64_t step = 1; step <= 5; ++step) {
    params.values()[0] = static_cast<float>(step);
    REQUIRE(folder.save_checkpoint({.step = step}, params, sgd->checkpoint_state()));
  }
  CHECK(steps(folder) == std::vector<int64_t>{3, 4, 5});
  CHECK(std::filesystem::equivalent(dir / "run/checkpoint-5.pens", dir / "run/checkpoint.pens"));
  // Resumed from step 3, the folder holds step 3's values; it makes checkpoint-3 its
  // checkpoint.pens and forgets 4 and 5 only once the resume is accepted.
  CHECK(folder.load_checkpoint(params, sgd->checkpoint_state(), dir / "run/checkpoint-3.pens").step == 3);
  CHECK(params.values()[0] == 3.0f);
  CHECK(steps(folder) == std::vector<int64_t>{3, 4, 5});
  CHECK(std::filesystem::equivalent(dir / "run/checkpoint-5.pens", dir / "run/checkpoint.pens"));
  TrainConfig train_config;
  train_config.model = "m.json";
  const json config = to_json(train_config);
  folder.accept_resume(config, config);
  CHECK(steps(folder) == std::vector<int64_t>{3});
  CHECK(std::filesystem::equivalent(dir / "run/checkpoint-3.pens", dir / "run/checkpoint.pens"));
  // A checkpoint from before configs held absolute paths holds them relative to the
  // folder the run was started from, taken to be the working directory.
  json absolute = config;
  absolute["model"] = (std::filesystem::current_path() / "m.json").string();
  CHECK_NOTHROW(folder.accept_resume(config, absolute));
  absolute["model"] = (std::filesystem::current_path() / "elsewhere/m.json").string();
  CHECK_ERROR_MENTIONS(folder.accept_resume(config, absolute), "elsewhere/m.json\" now");
  // A folder keeping one checkpoint has checkpoint.pens alone.
  RunFolder single(dir / "run", 1);
  REQUIRE(single.save_checkpoint({.step = 6}, params, sgd->checkpoint_state()));
  CHECK(steps(single).empty());
  CHECK_ERROR_MENTIONS(single.load_checkpoint(params, sgd->checkpoint_state(), dir / "run/checkpoint-4.pens"),
                       "checkpoint-4.pens", "no such checkpoint");
}

TEST_CASE("training configs: unknown fields and bad values are errors naming the field") {
  CHECK_ERROR_MENTIONS(parse_train_config(json::parse(R"({"model": "m.json", "optimiser": {}})"), "c.json"),
                       "c.json", "unknown field optimiser");
  CHECK_ERROR_MENTIONS(parse_train_config(json::parse(R"({"model": "m.json", "run": {"epoks": 3}})"), "c.json"),
                       "unknown field run.epoks");
  CHECK_ERROR_MENTIONS(parse_train_config(json::parse(R"({"model": "m.json", "optimizer": {"decay": 2}})"), "c.json"),
                       "optimizer.decay", "outside [0, 1]");
  CHECK_ERROR_MENTIONS(
      parse_train_config(
          json::parse(R"({"model": "m.json", "optimizer": {"anneal_start_epoch": 9, "anneal_end_epoch": 9}})"), "c.json"),
      "c.json", "anneal_start_epoch (9) must be below anneal_end_epoch (9)");
  CHECK_ERROR_MENTIONS(parse_train_config(json::parse(R"({"model": "m.json", "batch": {"labeled": 1.5}})"), "c.json"),
                       "batch.labeled", "integer");
  CHECK_ERROR_MENTIONS(parse_train_config(json::parse(R"({"run": {}})"), "c.json"), "names no model");
  CHECK_ERROR_MENTIONS(
      parse_train_config(json::parse(R"({"model": "m.json", "optimizer": {"max_norm_rule": "rows"}})"), "c.json"),
      "'rows'", "unit-incoming");
  const TrainConfig c = parse_train_config(
      json::parse(R"({"model": "m.json", "data": {"labeled": 600}, "lambda_schedule": [{"epochs": 5, "scale": 0}],
                     "optimizer": {"anneal_start_epoch": 60, "anneal_end_epoch": 90}})"),
      "c.json");
  CHECK(c.labeled == 600);
  CHECK(c.schedule.anneal_end_epoch == 90);
  REQUIRE(c.lambda_schedule);
  CHECK(c.lambda_schedule->at(0).epochs == 5);
  CHECK(parse_train_config(to_json(c), "again").labeled == 600);  // to_json round-trips
  CHECK(parse_train_config(to_json(c), "again").schedule.anneal_start_epoch == 60);
}

TEST_CASE("a config's model_patch edits its model as it loads: read, written back, trained on, and errors that say where") {
  testing::TempDir dir;
  const std::string model = write_small_model(dir);
  const json patch = json::parse(R"([{"op": "replace", "path": "/pseudo_ensemble/penalties/0/lambda", "value": 0.5},
      {"op": "add", "path": "/pseudo_ensemble/penalties/-", "value": {"kind": "kl", "lambda": 2, "node": "logits"}}])");
  TrainConfig c = parse_train_config({{"model", model}, {"model_patch", patch}}, "c.json");
  CHECK(json::parse(c.model_patch) == patch);
  CHECK(parse_train_config(to_json(c), "again").model_patch == c.model_patch);  // to_json round-trips
  const Model m = load_configured_model("c.json", model, c.model_patch);
  REQUIRE(m.ensemble);
  REQUIRE(m.ensemble->penalties.size() == 2);
  CHECK(m.ensemble->penalties[0].lambda == 0.5);
  CHECK(m.ensemble->penalties[1].kind == "kl");
  CHECK(m.ensemble->penalties[1].lambda == 2);
  REQUIRE(load_model(model).ensemble);
  CHECK(load_model(model).ensemble->penalties.size() == 1);  // the file itself is untouched

  // Training reads the patch: the run equals one on the patched model saved as a file, and
  // differs from one on the file as it is.
  TrainConfig patched = small_config(model);
  patched.model_patch = c.model_patch;
  patched.epochs = 1;
  TrainConfig copied = patched;
  copied.model_patch = "";
  copied.model = dir / "patched-copy.model.json";
  save_model(m, copied.model, ValueStorage::None);
  TrainConfig unpatched = copied;
  unpatched.model = model;
  Quiet quiet;
  for (auto [config, folder] : {std::pair{&patched, "patched"}, {&copied, "copied"}, {&unpatched, "unpatched"}}) {
    train(*config, small_data(), dir / folder, quiet);
  }
  const auto values = [&](const char* folder) {
    const Model trained = load_model(dir / (std::string(folder) + "/model.json"));
    REQUIRE(trained.values);
    const auto v = trained.values->values();
    return std::vector<double>(v.begin(), v.end());
  };
  const auto a = values("patched"), b = values("copied"), u = values("unpatched");
  CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  CHECK_FALSE(std::equal(a.begin(), a.end(), u.begin(), u.end()));

  CHECK_ERROR_MENTIONS(parse_train_config({{"model", model}, {"model_patch", json::object()}}, "c.json"), "c.json",
                       "model_patch must be a non-empty array of operations");
  CHECK_ERROR_MENTIONS(parse_train_config({{"model", model}, {"model_patch", json::array()}}, "c.json"),
                       "model_patch must be a non-empty array");
  const auto load_with = [&](const char* ops) { load_configured_model("c.json", model, json::parse(ops).dump()); };
  CHECK_ERROR_MENTIONS(load_with(R"([{"op": "replace", "path": "/pseudo_ensemble/penalties/3/lambda", "value": 1}])"),
                       "c.json", "model_patch[0]", "/pseudo_ensemble/penalties has 1 element; there is no element 3");
  // The patched model is checked as a file is, and the error names the patch.
  CHECK_ERROR_MENTIONS(load_with(R"([{"op": "replace", "path": "/pseudo_ensemble/penalties/0/kind", "value": "nope"}])"),
                       "c.json", "small.model.json with the config's model_patch", "nope");
}

TEST_CASE("every training config under examples/ parses and names a model file that loads, and the repository's data") {
  int configs = 0;
  const std::string mnist = absolute_path(pens::testing::source_dir() + "/data/mnist");
  for (const auto& entry : std::filesystem::directory_iterator(pens::testing::source_dir() + "/examples/mnist")) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".json" || name.ends_with(".model.json")) continue;
    INFO(entry.path().string());
    const json j = read_config_file(entry.path().string());
    if (name.starts_with("pretrain")) {  // pens pretrain's: every layer must make an autoencoder
      const PretrainConfig p = parse_pretrain_config(j, name);
      CHECK(configured_data_dir(entry.path().string(), j, p.data_dir) == mnist);
      const Model m = load_model((entry.path().parent_path() / p.model).string());
      for (const PretrainLayer& layer : p.layers) CHECK_NOTHROW(denoising_autoencoder(m.graph, layer.autoencoder));
      continue;
    }
    const TrainConfig c = parse_train_config(j, name);
    CHECK(configured_data_dir(entry.path().string(), j, c.data_dir) == mnist);
    const Model m = load_configured_model(name, (entry.path().parent_path() / c.model).string(), c.model_patch);
    if (c.batch_unlabeled > 0) CHECK(m.ensemble.has_value());
    for (const TrainablePeriod& period : c.trainable_periods) {
      for (const std::string& parameter : period.parameters) {
        INFO("trainable " << parameter);
        CHECK((m.graph.find(parameter) && m.graph[parameter].op->name == "parameter"));
      }
    }
    ++configs;
  }
  CHECK(configs >= 6);
}

TEST_CASE("every tree config under examples/sst parses, names a model file that has the parameters its l2 names, and the treebank") {
  int configs = 0;
  const std::string sst = absolute_path(pens::testing::source_dir() + "/../shared/data/sst");
  for (const auto& entry : std::filesystem::directory_iterator(pens::testing::source_dir() + "/examples/sst")) {
    if (entry.path().extension() != ".json" || entry.path().filename().string().ends_with(".model.json")) continue;
    const json j = read_config_file(entry.path().string());
    INFO(entry.path().string());
    if (run_kind_of(j) == "skipgram") {  // pens pretrain's
      CHECK(configured_data_dir(entry.path().string(), j, parse_skipgram_config(j, "s").data_dir) == sst);
      continue;
    }
    REQUIRE(run_kind_of(j) == "trees");
    const TreeConfig c = parse_tree_config(j, entry.path().string());
    CHECK(configured_data_dir(entry.path().string(), j, c.data_dir) == sst);
    if (!c.word_vectors.empty()) {  // the file scripts/fetch-glove.sh writes
      CHECK(relative_to_config(entry.path().string(), c.word_vectors) ==
            absolute_path(pens::testing::source_dir() + "/data/glove/glove-6b-100d.txt"));
    }
    const Model m = load_model((entry.path().parent_path() / c.model).string());
    REQUIRE(m.tree.has_value());
    for (const auto& item : c.l2) {
      const auto& parameter = item.first;  // not a binding: doctest captures it (clang < 16)
      INFO("l2 " << parameter);
      CHECK((m.graph.find(parameter) && m.graph[parameter].op->name == "parameter"));
    }
    ++configs;
  }
  CHECK(configs >= 3);
}

TEST_CASE("a resumed run continues exactly as an unbroken one") {
  testing::TempDir dir;
  TrainConfig config = small_config(write_small_model(dir));
  check_resume_is_exact(config, dir);
  const std::vector<json> ma = metrics_of(dir / "unbroken/metrics.jsonl"), mb = metrics_of(dir / "resumed/metrics.jsonl");
  REQUIRE(ma.size() == 4);
  REQUIRE(mb.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(ma[i]["step"] == mb[i]["step"]);
    CHECK(ma[i]["validation_error"] == mb[i]["validation_error"]);
    CHECK(ma[i]["objective"] == mb[i]["objective"]);
  }

  config.epochs = 4;
  config.batch_labeled = 8;  // a different run cannot resume this one
  Quiet quiet;
  const std::string config_before = read_file(dir / "resumed/config.json", 1 << 20);
  CHECK(config_before.find("\"labeled\": 16") != std::string::npos);
  const auto kept_before = RunFolder(dir / "resumed").kept_checkpoints();
  CHECK_ERROR_MENTIONS(train(config, small_data(), dir / "resumed", quiet, true), "checkpoint.pens",
                       "written by a different config", "batch.labeled 16 in the checkpoint, 8 now");
  // The refused resume changed nothing in the folder.
  CHECK(read_file(dir / "resumed/config.json", 1 << 20) == config_before);
  CHECK(RunFolder(dir / "resumed").kept_checkpoints() == kept_before);
  // Nor does one refused from another checkpoint file (--resume-from): the folder's
  // latest checkpoint stays its checkpoint.pens.
  const std::string checkpoint_before = read_file(dir / "resumed/checkpoint.pens", 1 << 24);
  CHECK_ERROR_MENTIONS(train(config, small_data(), dir / "resumed", quiet, Resume(dir / "unbroken/checkpoint.pens")),
                       "unbroken/checkpoint.pens", "written by a different config");
  CHECK_FALSE(std::filesystem::equivalent(dir / "resumed/checkpoint.pens", dir / "unbroken/checkpoint.pens"));
  CHECK(read_file(dir / "resumed/checkpoint.pens", 1 << 24) == checkpoint_before);
  CHECK(read_file(dir / "resumed/config.json", 1 << 20) == config_before);
}

TEST_CASE("a resumed run's clock goes on from its checkpoint's: its minutes and its budget are the whole run's") {
  testing::TempDir dir;
  TrainConfig config = two_epochs_into_run(dir);
  Quiet quiet;
  // As if the first two epochs had taken 1000 seconds.
  edit_checkpoint_header(dir / "run/checkpoint.pens", [](json& header) {
    CHECK(header["elapsed_seconds"].get<double>() > 0);
    header["elapsed_seconds"] = 1000.0;
  });

  config.epochs = 3;
  const TrainSummary resumed = train(config, small_data(), dir / "run", quiet, /*resume=*/true);
  CHECK(resumed.json["steps"] == 150);
  CHECK(resumed.json["wall_seconds"].get<double>() >= 1000);
  const std::vector<json> lines = metrics_of(dir / "run/metrics.jsonl");
  REQUIRE(lines.size() == 3);
  CHECK(lines[1]["elapsed_seconds"].get<double>() < 1000);
  CHECK(lines[2]["elapsed_seconds"].get<double>() >= 1000);

  // A budget of 10 minutes was spent before the checkpoint: the resumed run stops at once.
  config.epochs = 4;
  config.budget_minutes = 10;
  const TrainSummary stopped = train(config, small_data(), dir / "run", quiet, /*resume=*/true);
  CHECK(stopped.json["steps"] == 150);
  CHECK(std::ranges::any_of(quiet.messages, [](const std::string& m) {
    return m.find("wall-clock budget of 10 minutes reached at step 150") != std::string::npos;
  }));
}

// A learning rate of 0 keeps the validation error where the first evaluation found it: the
// best stays at epoch 1, and the patience decides where the run ends.
TEST_CASE("a run ends once its best validation error is run.patience_epochs old, and a resume keeps to it") {
  testing::TempDir dir;
  TrainConfig config = small_config(write_small_model(dir));
  config.schedule.learning_rate = 0;
  config.epochs = 10;
  config.checkpoint_every_epochs = 1;
  config.patience_epochs = 2;
  Quiet quiet;
  const TrainSummary stopped = train(config, small_data(), dir / "run", quiet);
  CHECK(stopped.json["status"] == "finished");
  CHECK(stopped.json["steps"] == 150);
  CHECK(stopped.json["stopped_early"] == json{{"epoch", 3.0}, {"best_epoch", 1.0}, {"patience_epochs", 2.0}});
  CHECK(metrics_of(dir / "run/metrics.jsonl").size() == 3);
  CHECK(std::filesystem::exists(dir / "run/model.json"));
  CHECK(std::ranges::any_of(quiet.messages, [](const std::string& m) {
    return m.find("no better validation error for 2 epochs (patience 2): stopping at epoch 3, the best at epoch 1") !=
           std::string::npos;
  }));
  // Resumed as it was, it trains no further; with more patience it goes on.
  const TrainSummary again = train(config, small_data(), dir / "run", quiet, /*resume=*/true);
  CHECK(again.json["steps"] == 150);
  CHECK(metrics_of(dir / "run/metrics.jsonl").size() == 3);
  config.patience_epochs = 4;
  const TrainSummary longer = train(config, small_data(), dir / "run", quiet, /*resume=*/true);
  CHECK(longer.json["steps"] == 250);
  CHECK(longer.json["stopped_early"]["epoch"] == 5.0);
  // Without patience the run takes its length.
  config.patience_epochs = 0;
  config.epochs = 4;
  CHECK_FALSE(train(config, small_data(), dir / "whole", quiet).json.contains("stopped_early"));
}

TEST_CASE("a run resumes from a checkpoint an earlier pens wrote (format 1), and says its draws differ") {
  testing::TempDir dir;
  TrainConfig config = two_epochs_into_run(dir);
  // The checkpoint as format 1 wrote it: no optimizer kind, SGD's velocity as "momentum",
  // and none of the fields pens has since added (optimizer.kind, the elapsed seconds).
  edit_checkpoint_header(dir / "run/checkpoint.pens", [](json& header) {
    header["version"] = 1;
    header.erase("optimizer");
    header.erase("elapsed_seconds");
    header["config"]["optimizer"].erase("kind");
    for (json& t : header["tensors"]) {
      if (t["part"] == "velocity") t["part"] = "momentum";
    }
  });

  config.epochs = 3;
  Quiet resumed;
  const TrainSummary s = train(config, small_data(), dir / "run", resumed, /*resume=*/true);
  CHECK_FALSE(s.diverged);
  CHECK(s.json["steps"] == 150);
  bool resumed_at_100 = false, said_draws_differ = false;
  for (const std::string& m : resumed.messages) {
    resumed_at_100 |= m.find("at step 100") != std::string::npos;
    said_draws_differ |= m.find("checkpoint format 1") != std::string::npos && m.find("noise") != std::string::npos;
  }
  CHECK(resumed_at_100);
  CHECK(said_draws_differ);

  // A checkpoint of another optimizer is refused by name.
  config.optimizer = "adagrad";
  config.optimizer_settings = {{"epsilon", 1e-8}, {"initial_accumulator", 0.0}};
  CHECK_ERROR_MENTIONS(train(config, small_data(), dir / "run", resumed, true), "optimizer 'sgd'", "'adagrad'");
}

TEST_CASE("AdaGrad trains the semi-supervised run from a config, and its state resumes exactly") {
  testing::TempDir dir;
  const json j = json::parse(R"({"model": "m.json", "optimizer": {"kind": "adagrad", "learning_rate": 0.05,
                                 "epsilon": 1e-6}})");
  TrainConfig config = parse_train_config(j, "c.json");
  CHECK(config.optimizer == "adagrad");
  CHECK(config.optimizer_settings.get_float("epsilon") == 1e-6);
  CHECK(config.optimizer_settings.get_float("initial_accumulator") == 0.0);  // the default, filled in
  CHECK(parse_train_config(to_json(config), "again").optimizer_settings == config.optimizer_settings);
  CHECK_ERROR_MENTIONS(parse_train_config(json::parse(R"({"model": "m", "optimizer": {"kind": "adagrad", "eps": 1}})"),
                                          "c.json"),
                       "unknown field optimizer.eps (did you mean 'epsilon'?", "fields of optimizer adagrad: ",
                       "initial_accumulator");
  CHECK_ERROR_MENTIONS(parse_train_config(json::parse(R"({"model": "m", "optimizer": {"kind": "lbfgs"}})"), "c.json"),
                       "optimizer.kind: unknown optimizer 'lbfgs' (registered: adagrad, ");

  TrainConfig run = small_config(write_small_model(dir));
  run.optimizer = config.optimizer;
  run.optimizer_settings = config.optimizer_settings;
  run.schedule.learning_rate = 0.05;
  const TrainSummary unbroken = check_resume_is_exact(run, dir);
  REQUIRE_FALSE(unbroken.diverged);
  CHECK(unbroken.json["best_validation"]["validation_error"].get<double>() < 0.5);  // chance is 0.75
}

TEST_CASE("a stage that restarts the optimizer: read from a config, seen in the metrics, resumed exactly") {
  const TrainConfig c = parse_train_config(json::parse(R"({"model": "m.json", "lambda_schedule": [
      {"epochs": 1, "scale": 0}, {"epochs": 1, "scale": 1, "restart": true, "learning_rate": 0.05},
      {"epochs": 2, "scale": 2, "restart": true}]})"), "c.json");
  CHECK(c.schedule.restarts == std::vector<Restart>{{.epoch = 1, .learning_rate = 0.05}, {.epoch = 2}});
  CHECK(parse_train_config(to_json(c), "again").schedule.restarts == c.schedule.restarts);
  CHECK(to_json(c)["lambda_schedule"][2] == json{{"epochs", 2.0}, {"scale", 2.0}, {"restart", true}});
  const auto config_with = [](const char* stages) {
    return parse_train_config(json::parse(cat(R"({"model": "m.json", "lambda_schedule": )", stages, "}")), "c.json");
  };
  CHECK_ERROR_MENTIONS(config_with(R"([{"epochs": 1, "scale": 0}, {"epochs": 1, "scale": 1, "learning_rate": 0.05}])"),
                       "lambda_schedule[1].learning_rate", "without \"restart\": true");
  CHECK_ERROR_MENTIONS(config_with(R"([{"epochs": 1, "scale": 0, "restart": true}])"), "lambda_schedule[0].restart",
                       "first stage");
  CHECK_ERROR_MENTIONS(config_with(R"([{"epochs": 1, "scale": 0}, {"epochs": 1, "scale": 1, "restart": 1}])"),
                       "lambda_schedule[1].restart", "true or false");

  // Restarts at epochs 2 and 3.5 of 4, the first at a checkpoint: the run resumed there
  // resets the optimizer as the unbroken run does, and ends with the same parameters.
  testing::TempDir dir;
  TrainConfig config = small_config(write_small_model(dir));
  config.schedule.warmup_epochs = 1;
  config.lambda_schedule = {{2, 1.0}, {1.5, 1.0}, {0.5, 1.0}};
  config.schedule.restarts = {{.epoch = 2, .learning_rate = 0.04}, {.epoch = 3.5}};
  check_resume_is_exact(config, dir);
  const std::vector<json> m = metrics_of(dir / "unbroken/metrics.jsonl");
  REQUIRE(m.size() == 4);
  // The rate each evaluation reports is the one at its epoch, for the updates after it.
  CHECK(m[0]["learning_rate"].get<double>() == doctest::Approx(0.1));
  CHECK(m[1]["learning_rate"].get<double>() == 0.0);                    // epoch 2: the restart, warming up
  CHECK(m[2]["learning_rate"].get<double>() == doctest::Approx(0.04));  // epoch 3: warmed up, at its own rate
  CHECK(m[3]["learning_rate"].get<double>() == doctest::Approx(0.05));  // epoch 4: half warmed up at the base 0.1
}

TEST_CASE("a stage that trains some parameters only: the others keep their values, max-norm included") {
  const TrainConfig c = parse_train_config(json::parse(R"({"model": "m.json", "lambda_schedule": [
      {"epochs": 5, "scale": 0, "trainable": ["W3", "b3"]}, {"epochs": 5, "scale": 1, "restart": true},
      {"epochs": 2, "scale": 2, "restart": true, "trainable": ["W1"]}]})"), "c.json");
  CHECK(c.trainable_periods == std::vector<TrainablePeriod>{{.from = 0, .to = 5, .parameters = {"W3", "b3"}},
                                                            {.from = 10, .to = 12, .parameters = {"W1"}}});
  CHECK(parse_train_config(to_json(c), "again").trainable_periods == c.trainable_periods);
  const auto config_with = [](const char* stages) {
    return parse_train_config(json::parse(cat(R"({"model": "m.json", "lambda_schedule": )", stages, "}")), "c.json");
  };
  CHECK_ERROR_MENTIONS(config_with(R"([{"epochs": 1, "scale": 0}, {"epochs": 1, "scale": 1, "trainable": ["W3"]}])"),
                       "lambda_schedule[1].trainable", "\"restart\": true");
  CHECK_ERROR_MENTIONS(config_with(R"([{"epochs": 1, "scale": 0, "trainable": []}])"), "lambda_schedule[0].trainable",
                       "non-empty array of parameter names");
  CHECK_ERROR_MENTIONS(config_with(R"([{"epochs": 1, "scale": 0, "trainable": "W3"}])"), "lambda_schedule[0].trainable");

  // Max-norm 0.5 binds on the initial hidden weights (column norms about 1.2): a held W1
  // that the constraint touched would change.
  testing::TempDir dir;
  TrainConfig config = small_config(write_small_model(dir, 0.5));
  config.epochs = 1;
  config.lambda_schedule = {{1, 1.0}, {1, 1.0}};
  config.trainable_periods = {{.from = 0, .to = 1, .parameters = {"W3", "b3"}}};
  Quiet quiet;
  train(config, small_data(), dir / "top", quiet);
  const Model top = load_model(dir / "top/model.json");
  const Model untrained = load_model(write_small_model(dir, 0.5));
  ParamStore<float> initial(untrained.graph);
  initial.initialize(untrained.graph, config.init_seed);
  REQUIRE(top.values);
  for (const char* name : {"W1", "b1", "W2", "b2"}) {
    INFO(name);
    CHECK(top.values->value(name).arr().cwiseEqual(initial.value(name).arr()).all());
  }
  CHECK(initial.value("W1").mat().colwise().norm().maxCoeff() > 0.5);
  CHECK_FALSE(top.values->value("W3").arr().isApprox(initial.value("W3").arr()));
  CHECK(top.values->value("W3").mat().colwise().norm().maxCoeff() <= 0.5 + 1e-6);

  SUBCASE("after the period every parameter trains, and a run resumed at its start holds as the unbroken one") {
    config.lambda_schedule = {{2, 1.0}, {1, 1.0}, {1, 1.0}};
    config.schedule.restarts = {{.epoch = 2}, {.epoch = 3}};
    config.trainable_periods = {{.from = 2, .to = 3, .parameters = {"W2"}}};
    check_resume_is_exact(config, dir);
    const Model both = load_model(dir / "unbroken/model.json");
    REQUIRE(both.values);
    CHECK_FALSE(both.values->value("W1").arr().isApprox(initial.value("W1").arr()));
  }
  SUBCASE("a name that is not a parameter of the model") {
    config.trainable_periods = {{.from = 0, .to = 1, .parameters = {"W9"}}};
    CHECK_ERROR_MENTIONS(train(config, small_data(), dir / "bad", quiet), "trainable", "'W9'", "not a parameter");
  }
}

TEST_CASE("gradient transforms in a config: read, written back, checked, and a hold keeps its parameters") {
  const char* text = R"({"model": "m.json", "optimizer": {"transforms": [
      {"kind": "l2", "lambda": 1e-3, "params": ["W2", "W3"]}, {"kind": "hold", "params": ["W1", "b1"], "until": 1}]}})";
  const TrainConfig c = parse_train_config(json::parse(text), "c.json");
  REQUIRE(c.transforms.size() == 2);
  CHECK(c.transforms[0].kind == "l2");
  CHECK(c.transforms[0].lambda == 1e-3);
  CHECK(c.transforms[1].params == std::vector<std::string>{"W1", "b1"});
  CHECK(c.transforms[1].until == 1);
  CHECK(to_json(parse_train_config(to_json(c), "again")) == to_json(c));
  const auto config_with = [](const char* transforms) {
    return parse_train_config(json::parse(cat(R"({"model": "m.json", "optimizer": {"transforms": )", transforms, "}}")),
                              "c.json");
  };
  CHECK_ERROR_MENTIONS(config_with(R"([{"kind": "l3", "params": ["W1"]}])"), "optimizer.transforms[0].kind",
                       "did you mean 'l2'");
  CHECK_ERROR_MENTIONS(config_with(R"([{"kind": "l2", "params": ["W1"]}])"), "optimizer.transforms[0].lambda",
                       "required");
  CHECK_ERROR_MENTIONS(config_with(R"([{"kind": "hold", "params": []}])"), "optimizer.transforms[0].params");
  CHECK_ERROR_MENTIONS(config_with(R"([{"kind": "hold", "params": ["W1"], "untill": 2}])"), "untill");
  CHECK_ERROR_MENTIONS(config_with(R"({"kind": "hold"})"), "optimizer.transforms must be an array");

  // Trained: W1 and b1 held for the run's one epoch, with max-norm binding on W1 (the
  // constraint must skip it too); W2 trains.
  testing::TempDir dir;
  TrainConfig config = small_config(write_small_model(dir, 0.5));
  config.epochs = 1;
  config.transforms = c.transforms;
  Quiet quiet;
  train(config, small_data(), dir / "held", quiet);
  const Model held = load_model(dir / "held/model.json");
  ParamStore<float> initial(held.graph);
  initial.initialize(held.graph, config.init_seed);
  for (const char* name : {"W1", "b1"}) CHECK(held.values->value(name).arr().cwiseEqual(initial.value(name).arr()).all());
  CHECK_FALSE(held.values->value("W2").arr().isApprox(initial.value("W2").arr()));
  config.transforms[1].params = {"W9"};
  CHECK_ERROR_MENTIONS(train(config, small_data(), dir / "bad", quiet), "optimizer.transforms[1].params", "'W9'");
}

TEST_CASE("the complete config in docs/training.md parses and is examples/mnist/pea-600.json with its defaults") {
  const std::string page = read_file(pens::testing::source_dir() + "/docs/training.md", 1 << 20);
  const size_t intro = page.find("One complete config");
  REQUIRE(intro != std::string::npos);
  const size_t begin = page.find("```json\n", intro);
  REQUIRE(begin != std::string::npos);
  const size_t end = page.find("```", begin + 8);
  const json shown = json::parse(page.substr(begin + 8, end - begin - 8));
  const std::string example = pens::testing::source_dir() + "/examples/mnist/pea-600.json";
  TrainConfig documented = parse_train_config(shown, example);
  const TrainConfig written = parse_train_config(read_config_file(example), example);
  CHECK(documented.threads == 0);  // the page shows the default
  documented.threads = written.threads;
  json a = to_json(documented), b = to_json(written);
  a.erase("description");
  b.erase("description");
  CHECK(a == b);
}

TEST_CASE("the learning curve's script gives errors that are all equal a y range, and draws errors of 0") {
  const auto script = [](const std::string& metrics) {
    testing::TempDir dir;
    std::ofstream(dir / "metrics.jsonl") << metrics;
    write_reports(dir.path(), Model{});
    std::ifstream in(dir / "curve.gp");
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  // gnuplot warns of an empty y range when every drawn value is the same.
  const std::string flat = script(R"({"epoch": 1, "train_error": 0.5, "validation_error": 0.5, "test_error": 0.5})"
                                  "\n");
  CHECK(flat.find("set yrange [25:100]") != std::string::npos);
  CHECK(flat.find("set xrange [0:2]") != std::string::npos);
  // Errors of 0 (every column) are drawn at 0.01 % on the log axis, so the range is not
  // empty: no y range is set.
  const std::string spread = script(R"({"epoch": 1, "train_error": 1.0, "validation_error": 0.0, "test_error": 0.0})"
                                    "\n"
                                    R"({"epoch": 2, "train_error": 0.5, "validation_error": 0.0, "test_error": 0.0})"
                                    "\n");
  CHECK(spread.find("yrange") == std::string::npos);
  CHECK(spread.find("using 1:(drawn($3))") != std::string::npos);
  CHECK(spread.find("using 1:(drawn($4))") != std::string::npos);
}

}  // namespace test_trainer
