#include "pens/train/config/train_config.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "pens/serialization/json_patch.h"
#include "pens/serialization/json_text.h"
#include "pens/serialization/model_file.h"
#include "pens/train/config/config_reader.h"
#include "pens/train/optim/optimizer.h"

namespace pens {

using nlohmann::json;

namespace {

// The sections' fields (config_reader.h): read by parse_train_config, written by to_json.
const ConfigField<TrainConfig> kClassifierDataFields[] = {{"source", &TrainConfig::data_source},
                                                {"dir", &TrainConfig::data_dir},
                                                {"labeled", &TrainConfig::labeled, 0, 1e9},
                                                {"validation", &TrainConfig::validation, 0, 1e9},
                                                {"split_seed", &TrainConfig::split_seed, 0, kConfigHuge},
                                                {"unlabeled_validation", &TrainConfig::unlabeled_validation}};
const ConfigField<TrainConfig> kClassifierBatchFields[] = {{"labeled", &TrainConfig::batch_labeled, 1, 1e6},
                                                 {"unlabeled", &TrainConfig::batch_unlabeled, 0, 1e6},
                                                 {"shards", &TrainConfig::batch_shards, 1, 1024}};
const ConfigField<TrainConfig> kClassifierEvalFields[] = {
    {"every_epochs", &TrainConfig::eval_every_epochs, 1e-6, 1e9},
    {"batch", &TrainConfig::eval_batch, 1, 1e6},
    {"train_error_examples", &TrainConfig::train_error_examples, 0, 1e9},
    {"recalibrate_statistics", &TrainConfig::recalibrate_statistics, 0, 1e9}};

}  // namespace

TrainConfig parse_train_config(const json& j, const std::string& source) {
  TrainConfig c;
  c.source = source;
  ConfigSection top(j, "", source);
  read_kind(top, "classifier", source);
  top.string("description", c.description);
  top.required_string("model", c.model, "model file");
  c.model_patch = read_model_patch(top, source);
  top.string("init_from", c.init_from);
  std::string precision = precision_name(c.precision);
  top.string("precision", precision);
  c.precision = parse_precision(precision, source);
  if (const json* d = top.child("data")) {
    ConfigSection s(*d, "data", source);
    read_fields<TrainConfig>(s, c, kClassifierDataFields);
    const DataSourceKind& kind = configured_data_source(c.data_source, source);
    c.data_settings = s.settings(kind.settings, "data source " + kind.name);
  } else {
    normalize_attrs(configured_data_source(c.data_source, source).settings, c.data_settings, "data");
  }
  read_section<TrainConfig>(top, "batch", c, kClassifierBatchFields, source);
  read_optimizer_section(top, c, source);
  if (const json* l = top.child("lambda_schedule")) {
    if (!l->is_array()) fail(source, ": lambda_schedule must be an array of {epochs, scale}");
    c.lambda_schedule.emplace();
    double start = 0;
    for (size_t i = 0; i < l->size(); ++i) {
      ConfigSection s((*l)[i], cat("lambda_schedule[", i, "]"), source);
      const LambdaStage stage = read_lambda_stage(s);
      // A stage may start the optimizer afresh (train/optim/schedule.h), at a learning rate of its own.
      bool restart = false;
      s.boolean("restart", restart);
      double learning_rate = -1;
      s.number("learning_rate", learning_rate, 0, 1e3);
      if (learning_rate >= 0 && !restart) {
        fail(source, ": ", s.where("learning_rate"), " is given without \"restart\": true (a stage's learning rate is "
             "the base of its restarted schedule)");
      }
      if (restart && i == 0) fail(source, ": ", s.where("restart"), ": the first stage starts the run; nothing to restart");
      // A stage may update some parameters only (the authors' output-layer-only epochs
      // of PEA+); the held ones stay put only from a fresh optimizer (HoldParameters).
      if (const json* t = s.child("trainable")) {
        if (!t->is_array() || t->empty() ||
            !std::ranges::all_of(*t, [](const json& n) { return n.is_string() && !n.get<std::string>().empty(); })) {
          fail(source, ": ", s.where("trainable"), " must be a non-empty array of parameter names");
        }
        if (i > 0 && !restart) {
          fail(source, ": ", s.where("trainable"), " needs \"restart\": true on this stage (the optimizer's momentum "
               "from the stages before would move the parameters it holds)");
        }
        c.trainable_periods.push_back({.from = start, .to = start + stage.epochs,
                                       .parameters = t->get<std::vector<std::string>>()});
      }
      if (restart) {
        c.schedule.restarts.push_back(
            {.epoch = start, .learning_rate = learning_rate >= 0 ? std::optional(learning_rate) : std::nullopt});
      }
      c.lambda_schedule->push_back(stage);
      start += stage.epochs;
    }
  }
  read_run_sections(top, c, source);
  read_section<TrainConfig>(top, "eval", c, kClassifierEvalFields, source);
  return c;
}

json to_json(const TrainConfig& c) {
  json data = attributes_json(c.data_settings);
  write_fields<TrainConfig>(data, c, kClassifierDataFields);
  json j = {
      {"kind", "classifier"},
      {"description", c.description},
      {"model", c.model},
      {"init_from", c.init_from},
      {"data", data},
      {"batch", section_json<TrainConfig>(c, kClassifierBatchFields)},
      {"optimizer", optimizer_section_json(c)},
      {"eval", section_json<TrainConfig>(c, kClassifierEvalFields)},
  };
  write_run_sections(c, j);
  write_model_patch(c.model_patch, j);
  if (c.precision != Precision::Float32) j["precision"] = precision_name(c.precision);
  if (c.lambda_schedule) {
    j["lambda_schedule"] = json::array();
    double start = 0;
    for (const LambdaStage& s : *c.lambda_schedule) {
      json stage = {{"epochs", s.epochs}, {"scale", s.scale}};
      for (const Restart& r : c.schedule.restarts) {
        if (r.epoch != start) continue;
        stage["restart"] = true;
        if (r.learning_rate) stage["learning_rate"] = *r.learning_rate;
      }
      for (const TrainablePeriod& p : c.trainable_periods) {
        if (p.from == start) stage["trainable"] = p.parameters;
      }
      j["lambda_schedule"].push_back(stage);
      start += s.epochs;
    }
  }
  return j;
}

Model load_configured_model(const std::string& source, const std::string& path, const std::string& patch) {
  const std::string where = source.empty() ? "model: " : source + ": model: ";
  Model model;
  try {
    if (patch.empty()) {
      model = load_model(path);
    } else {
      // Errors in the patched model name the file and the patch: the field they point at
      // may be one the patch wrote.
      const json doc = apply_json_patch(read_json_file(path, kMaxModelFileBytes), json::parse(patch),
                                        cat(source.empty() ? "" : source + ": ", "model_patch"));
      const std::filesystem::path p(path);
      model = parse_model(doc.dump(), path + " with the config's model_patch",
                          p.has_parent_path() ? p.parent_path().string() : ".");
    }
  } catch (const Error& e) {
    fail(where, e.what());
  }
  if (const std::string dead = undrawn_noise(model); !dead.empty()) fail(where, path, ": ", dead);
  return model;
}

}  // namespace pens
