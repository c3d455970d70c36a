#include "pens/train/config/tree_config.h"

#include "pens/models/sst.h"
#include "pens/serialization/model_file.h"
#include "pens/train/config/config_reader.h"
#include "pens/train/optim/optimizer.h"

namespace pens {

using nlohmann::json;

void read_data_section(const json* section, const std::string& config, std::string& source, std::string& dir,
                       Attributes& settings, VocabularyPolicy& vocabulary) {
  if (!section) {
    normalize_attrs(configured_treebank_source(source, config).settings, settings, "data");
    return;
  }
  ConfigSection s(*section, "data", config);
  s.string("source", source);
  s.string("dir", dir);
  s.number("min_count", vocabulary.min_count, 1, 1e9);
  s.boolean("lowercase", vocabulary.lowercase);
  const TreebankSourceKind& kind = configured_treebank_source(source, config);
  settings = s.settings(kind.settings, "treebank source " + kind.name);
}

json data_section_json(const std::string& source, const std::string& dir, const Attributes& settings,
                       const VocabularyPolicy& vocabulary) {
  json j = attributes_json(settings);
  j.update({{"source", source}, {"dir", dir}, {"min_count", vocabulary.min_count}, {"lowercase", vocabulary.lowercase}});
  return j;
}

namespace {

// The sections' fields (config_reader.h): read by parse_tree_config, written by to_json.
const ConfigField<TreeConfig> kTreeBatchFields[] = {{"trees", &TreeConfig::batch_trees, 1, 1e6},
                                                {"groups", &TreeConfig::batch_groups, 1, 1024}};
const ConfigField<TreeConfig> kTreeRestartFields[] = {{"restart_every_epochs", &TreeConfig::restart_every_epochs, 0, 1e9},
                                                      {"restart_before_epoch", &TreeConfig::restart_before_epoch, 0, 1e9}};
const ConfigField<TreeConfig> kTreeEvalFields[] = {{"samples", &TreeConfig::eval_samples, 0, 1e4},
                                               {"final_samples", &TreeConfig::final_samples, 0, 1e4},
                                               {"train_trees", &TreeConfig::train_eval_trees, 0, 1e9}};

}  // namespace

TreeConfig parse_tree_config(const json& j, const std::string& source) {
  TreeConfig c;
  c.source = source;
  ConfigSection top(j, "", source);
  read_kind(top, "trees", source);
  top.string("description", c.description);
  top.required_string("model", c.model, "model file");
  c.model_patch = read_model_patch(top, source);
  top.string("init_from", c.init_from);
  top.string("word_vectors", c.word_vectors);
  top.string("task", c.task);
  try {
    parse_sentiment_task(c.task);
  } catch (const Error& e) {
    fail(source, ": task: ", e.what());
  }
  read_data_section(top.child("data"), source, c.data_source, c.data_dir, c.data_settings, c.vocabulary);
  read_section<TreeConfig>(top, "batch", c, kTreeBatchFields, source);
  read_optimizer_section<TreeConfig>(top, c, source, kTreeRestartFields);
  top.number_map("l2", c.l2, 0, 1e3);
  top.number("freeze_words_epochs", c.freeze_words_epochs, 0, 1e9);
  if (const json* l = top.child("lambda_schedule")) {
    if (!l->is_array()) fail(source, ": lambda_schedule must be an array of {epochs, scale}");
    c.lambda_schedule.emplace();
    for (size_t i = 0; i < l->size(); ++i) {
      ConfigSection s((*l)[i], cat("lambda_schedule[", i, "]"), source);
      c.lambda_schedule->push_back(read_lambda_stage(s));
    }
  }
  read_run_sections(top, c, source);
  read_section<TreeConfig>(top, "eval", c, kTreeEvalFields, source);
  return c;
}

json to_json(const TreeConfig& c) {
  json l2 = json::object();
  for (const auto& [name, value] : c.l2) l2[name] = value;
  json j = {
      {"kind", "trees"},
      {"description", c.description},
      {"model", c.model},
      {"init_from", c.init_from},
      {"word_vectors", c.word_vectors},
      {"task", c.task},
      {"data", data_section_json(c.data_source, c.data_dir, c.data_settings, c.vocabulary)},
      {"batch", section_json<TreeConfig>(c, kTreeBatchFields)},
      {"optimizer", optimizer_section_json<TreeConfig>(c, kTreeRestartFields)},
      {"l2", l2},
      {"freeze_words_epochs", c.freeze_words_epochs},
      {"eval", section_json<TreeConfig>(c, kTreeEvalFields)},
  };
  write_run_sections(c, j);
  write_model_patch(c.model_patch, j);
  if (c.lambda_schedule) {
    j["lambda_schedule"] = json::array();
    for (const LambdaStage& s : *c.lambda_schedule) {
      j["lambda_schedule"].push_back({{"epochs", s.epochs}, {"scale", s.scale}});
    }
  }
  return j;
}

}  // namespace pens
