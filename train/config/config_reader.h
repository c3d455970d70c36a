// Reading the JSON config files of pens train and pens pretrain: one object at a time,
// refusing unknown keys (a misspelt key would otherwise be ignored silently) and values
// of the wrong type or range, each error naming the file and the field.
#pragma once

#include <algorithm>
#include <cmath>
#include <exception>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/data_source.h"
#include "pens/models/treebank_source.h"
#include "pens/ops/ir/attributes.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/ir/suggest.h"
#include "pens/serialization/model_file.h"
#include "pens/train/optim/constraints.h"
#include "pens/train/optim/groups.h"
#include "pens/train/optim/optimizer.h"
#include "pens/train/optim/schedule.h"
#include "pens/train/optim/transform.h"

namespace pens {

// Upper bound for seeds and other unbounded integers in a config.
inline constexpr double kConfigHuge = 1e15;

// Reads the fields of one JSON object of a config. When it goes out of scope without an
// exception in flight, a field nobody read is an error naming it.
class ConfigSection {
 public:
  ConfigSection(const nlohmann::json& j, std::string path, const std::string& source)
      : path_(std::move(path)), source_(source) {
    if (!j.is_object()) fail(source_, ": ", where(""), " must be an object");
    j_ = &j;
  }
  ~ConfigSection() noexcept(false) {
    if (std::uncaught_exceptions() > 0) return;
    for (const auto& [key, value] : j_->items()) {
      if (!used_.count(key)) fail(source_, ": unknown field ", where(key), unknown_name_hint(key, known_fields()));
    }
  }
  // Every number of every config goes through here: a field of type T (an integer type
  // or double) in [low, high].
  template <class T>
  void number(const char* key, T& out, double low, double high) {
    used_.insert(key);
    if (j_->contains(key)) out = checked<T>((*j_)[key], where(key), low, high);
  }
  // An object of free-form names (parameters, say) to numbers in [low, high].
  template <class Map>
  void number_map(const char* key, Map& out, double low, double high) {
    const nlohmann::json* m = child(key);
    if (!m) return;
    if (!m->is_object()) fail(source_, ": ", where(key), " must be an object {name: number}");
    for (const auto& [name, value] : m->items()) {
      out[name] = checked<typename Map::mapped_type>(value, where(key) + "." + name, low, high);
    }
  }
  void boolean(const char* key, bool& out) {
    used_.insert(key);
    if (!j_->contains(key)) return;
    if (!(*j_)[key].is_boolean()) fail(source_, ": ", where(key), " must be true or false");
    out = (*j_)[key].get<bool>();
  }
  void string(const char* key, std::string& out) {
    used_.insert(key);
    if (!j_->contains(key)) return;
    if (!(*j_)[key].is_string()) fail(source_, ": ", where(key), " must be a string");
    out = (*j_)[key].get<std::string>();
  }
  // A string the config must give; `what` says what it names ("model file").
  void required_string(const char* key, std::string& out, const char* what) {
    string(key, out);
    if (out.empty()) fail(source_, ": the config names no ", what, " (field \"", where(key), "\")");
  }
  const nlohmann::json* child(const char* key) {
    used_.insert(key);
    return j_->contains(key) ? &(*j_)[key] : nullptr;
  }
  // Every field not read so far, as settings of `owner` (an optimizer kind, say): each
  // must be in `schema`, with its type; defaults are filled in.
  Attributes settings(const std::vector<AttrSpec>& schema, const std::string& owner) {
    Attributes out;
    std::vector<std::string> fields = known_fields();
    for (const AttrSpec& s : schema) fields.push_back(s.name);
    for (const auto& [key, value] : j_->items()) {
      if (used_.count(key)) continue;
      used_.insert(key);
      const AttrSpec* spec = nullptr;
      for (const AttrSpec& s : schema) spec = s.name == key ? &s : spec;
      if (!spec) fail(source_, ": unknown field ", where(key), unknown_name_hint(key, fields, "fields of " + owner));
      if (spec->type == AttrType::String) {
        if (!value.is_string()) fail(source_, ": ", where(key), " must be a string");
        out.set(key, value.get<std::string>());
      } else if (spec->type == AttrType::Int || spec->type == AttrType::Float) {
        if (!value.is_number() || !std::isfinite(value.get<double>())) fail(source_, ": ", where(key), " must be a number");
        const double d = value.get<double>();
        if (spec->type == AttrType::Int && d != std::floor(d)) fail(source_, ": ", where(key), " must be an integer");
        out.set(key, spec->type == AttrType::Int ? AttrValue(static_cast<int64_t>(d)) : AttrValue(d));
      } else {
        fail(source_, ": ", where(key), ": settings of type ", attr_type_name(spec->type), " are not read from configs");
      }
    }
    normalize_attrs(schema, out, cat(source_, ": ", where(""), " (", owner, ")"));
    return out;
  }
  std::string where(const std::string& key) const {
    return key.empty() ? (path_.empty() ? "the config" : path_) : (path_.empty() ? key : path_ + "." + key);
  }

 private:
  template <class T>
  T checked(const nlohmann::json& v, const std::string& field, double low, double high) const {
    if (!v.is_number()) fail(source_, ": ", field, " must be a number");
    const double d = v.get<double>();
    if (!(d >= low && d <= high)) fail(source_, ": ", field, " = ", d, " is outside [", low, ", ", high, "]");
    if (std::is_integral_v<T> && d != std::floor(d)) fail(source_, ": ", field, " must be an integer");
    return static_cast<T>(d);
  }

  const nlohmann::json* j_ = nullptr;
  std::string path_;
  const std::string& source_;
  // The fields this section reads: every key a reader asked for, given or not.
  std::vector<std::string> known_fields() const { return {used_.begin(), used_.end()}; }

  std::set<std::string> used_;
};

// The registered optimizer a config's optimizer.kind names, or an Error naming the field
// and the kinds there are.
inline const OptimizerKind& configured_optimizer(const std::string& kind, const std::string& source) {
  const OptimizerKind* found = OptimizerRegistry::global().find(kind);
  if (!found) {
    fail(source, ": optimizer.kind: ", OptimizerRegistry::global().unknown(kind));
  }
  return *found;
}

// A config's "kind" (train/loop/run_kind.h: which kind of run reads it), which must be `kind`
// when the config gives one.
inline void read_kind(ConfigSection& top, const char* kind, const std::string& source) {
  std::string given = kind;
  top.string("kind", given);
  if (given != kind) fail(source, ": kind is \"", given, "\", but it is read as a ", kind, " config");
}

// A config's "model_patch": operations on its model file's JSON (serialization/json_patch.h),
// kept as JSON text ("" for none) and applied when the model is loaded, where an
// operation's error can name what the model holds at its path.
inline std::string read_model_patch(ConfigSection& top, const std::string& source) {
  const nlohmann::json* patch = top.child("model_patch");
  if (!patch) return "";
  if (!patch->is_array() || patch->empty()) {
    fail(source, ": model_patch must be a non-empty array of operations {\"op\", \"path\", \"value\"}");
  }
  return patch->dump();
}

inline void write_model_patch(const std::string& patch, nlohmann::json& config) {
  if (!patch.empty()) config["model_patch"] = nlohmann::json::parse(patch);
}

// One field of a config section: its name in the JSON, the config's member it is read
// into and written from, and for a number the range it must fall in. A section's table of
// fields is the one place its fields are named, so that reading and writing (to_json,
// which config.json, checkpoints and the resume check go by) cannot drift apart.
template <class Config>
struct ConfigField {
  using Member = std::variant<int64_t Config::*, uint64_t Config::*, int Config::*, double Config::*, bool Config::*,
                              std::string Config::*>;
  const char* name;
  Member member;
  double low = 0, high = 0;
};

template <class Config>
void read_fields(ConfigSection& s, Config& c, std::span<const ConfigField<Config>> fields) {
  for (const ConfigField<Config>& f : fields) {
    std::visit(
        [&](auto member) {
          using T = std::remove_reference_t<decltype(c.*member)>;
          if constexpr (std::is_same_v<T, bool>) {
            s.boolean(f.name, c.*member);
          } else if constexpr (std::is_same_v<T, std::string>) {
            s.string(f.name, c.*member);
          } else {
            s.number(f.name, c.*member, f.low, f.high);
          }
        },
        f.member);
  }
}

template <class Config>
void write_fields(nlohmann::json& section, const Config& c, std::span<const ConfigField<Config>> fields) {
  for (const ConfigField<Config>& f : fields) std::visit([&](auto member) { section[f.name] = c.*member; }, f.member);
}

// A section of its fields alone (batch, eval): read when the config has it.
template <class Config>
void read_section(ConfigSection& top, const char* name, Config& c, std::span<const ConfigField<Config>> fields,
                  const std::string& source) {
  if (const nlohmann::json* j = top.child(name)) {
    ConfigSection s(*j, name, source);
    read_fields(s, c, fields);
  }
}
template <class Config>
nlohmann::json section_json(const Config& c, std::span<const ConfigField<Config>> fields) {
  nlohmann::json section = nlohmann::json::object();
  write_fields(section, c, fields);
  return section;
}

// The checkpoint section (cadence and how many are kept), which every kind of run shares.
template <class Config>
std::vector<ConfigField<Config>> checkpoint_fields() {
  return {{"every_epochs", &Config::checkpoint_every_epochs, 1e-6, 1e9}, {"keep", &Config::checkpoint_keep, 1, 1e6}};
}
template <class Config>
void read_checkpoint_section(ConfigSection& top, Config& c, const std::string& source) {
  read_section<Config>(top, "checkpoint", c, checkpoint_fields<Config>(), source);
}
template <class Config>
nlohmann::json checkpoint_section_json(const Config& c) {
  return section_json<Config>(c, checkpoint_fields<Config>());
}

// The sections every kind of training config shares, read into and written from the
// config's members of the same names, so that they cannot drift between kinds: run (the
// length, budget, seeds and threads; steps_per_epoch for configs that count epochs in
// steps) and checkpoint.
template <class Config>
std::vector<ConfigField<Config>> run_fields() {
  std::vector<ConfigField<Config>> f = {{"epochs", &Config::epochs, 1, 1e9},
                                        {"budget_minutes", &Config::budget_minutes, 0, 1e9},
                                        {"seed", &Config::seed, 0, kConfigHuge},
                                        {"init_seed", &Config::init_seed, 0, kConfigHuge},
                                        {"threads", &Config::threads, 0, 1024}};
  if constexpr (requires { &Config::steps_per_epoch; }) f.push_back({"steps_per_epoch", &Config::steps_per_epoch, 1, 1e9});
  if constexpr (requires { &Config::patience_epochs; }) f.push_back({"patience_epochs", &Config::patience_epochs, 0, 1e9});
  return f;
}

template <class Config>
void read_run_sections(ConfigSection& top, Config& c, const std::string& source) {
  read_section<Config>(top, "run", c, run_fields<Config>(), source);
  read_checkpoint_section(top, c, source);
}

template <class Config>
void write_run_sections(const Config& c, nlohmann::json& j) {
  j["run"] = section_json<Config>(c, run_fields<Config>());
  j["checkpoint"] = checkpoint_section_json(c);
}

// The data source a config's data.source names; an Error with the registered ones.
inline const DataSourceKind& configured_data_source(const std::string& kind, const std::string& source) {
  const DataSourceKind* found = DataSourceRegistry::global().find(kind);
  if (!found) fail(source, ": data.source: ", DataSourceRegistry::global().unknown(kind));
  return *found;
}
// The same for a tree or skip-gram config's treebank source.
inline const TreebankSourceKind& configured_treebank_source(const std::string& kind, const std::string& source) {
  const TreebankSourceKind* found = TreebankSourceRegistry::global().find(kind);
  if (!found) fail(source, ": data.source: ", TreebankSourceRegistry::global().unknown(kind));
  return *found;
}

// The optimizer section's "transforms" (train/optim/transform.h): each {kind, params, ...}
// checked here, the parameter names once the model is known.
inline void read_transforms(ConfigSection& optimizer, std::vector<TransformSpec>& out, const std::string& source) {
  const nlohmann::json* list = optimizer.child("transforms");
  if (!list) return;
  if (!list->is_array()) fail(source, ": optimizer.transforms must be an array of {\"kind\": ..., \"params\": [...]}");
  out.clear();
  for (size_t i = 0; i < list->size(); ++i) {
    ConfigSection t((*list)[i], cat("optimizer.transforms[", i, "]"), source);
    TransformSpec& spec = out.emplace_back();
    t.required_string("kind", spec.kind, "transform kind");
    const nlohmann::json* params = t.child("params");
    if (!params || !params->is_array() || params->empty() ||
        !std::all_of(params->begin(), params->end(), [](const nlohmann::json& p) { return p.is_string(); })) {
      fail(source, ": ", t.where("params"), " must be a non-empty array of parameter names");
    }
    spec.params = params->get<std::vector<std::string>>();
    if (spec.kind == "l2") {
      spec.lambda = -1;
      t.number("lambda", spec.lambda, 0, 1e3);
      if (spec.lambda < 0) fail(source, ": ", t.where("lambda"), " is required: the weight of Σ (λ / 2) ||θ||²");
    } else if (spec.kind == "hold") {
      t.number("from", spec.from, 0, 1e9);
      t.number("until", spec.until, 0, 1e300);
    } else {
      fail(source, ": ", t.where("kind"), ": ", unknown_name_hint(spec.kind, {"l2", "hold"}, "transforms"));
    }
  }
}

inline nlohmann::json transforms_json(const std::vector<TransformSpec>& specs) {
  nlohmann::json out = nlohmann::json::array();
  for (const TransformSpec& s : specs) {
    nlohmann::json t = {{"kind", s.kind}, {"params", s.params}};
    if (s.kind == "l2") t["lambda"] = s.lambda;
    if (s.kind == "hold") t.update({{"from", s.from}, {"until", s.until}});
    out.push_back(std::move(t));
  }
  return out;
}

// optimizer.groups: parameters updated by optimizers of their own (train/optim/groups.h).
inline void read_optimizer_groups(ConfigSection& optimizer, std::vector<OptimizerGroup>& out, const std::string& source) {
  const nlohmann::json* list = optimizer.child("groups");
  if (!list) return;
  if (!list->is_array()) {
    fail(source, ": optimizer.groups must be an array of {\"params\": [...], \"kind\": ..., \"learning_rate\": ...}");
  }
  out.clear();
  for (size_t i = 0; i < list->size(); ++i) {
    ConfigSection g((*list)[i], cat("optimizer.groups[", i, "]"), source);
    OptimizerGroup& group = out.emplace_back();
    const nlohmann::json* params = g.child("params");
    if (!params || !params->is_array() || params->empty() ||
        !std::all_of(params->begin(), params->end(), [](const nlohmann::json& p) { return p.is_string(); })) {
      fail(source, ": ", g.where("params"), " must be a non-empty array of parameter names");
    }
    group.params = params->get<std::vector<std::string>>();
    group.kind.clear();  // required here
    g.required_string("kind", group.kind, "group's optimizer kind");
    const OptimizerKind& kind = configured_optimizer(group.kind, source);
    group.learning_rate = -1;
    g.number("learning_rate", group.learning_rate, 0, 1e3);
    if (group.learning_rate < 0) fail(source, ": ", g.where("learning_rate"), " is required");
    g.number("momentum", group.momentum, 0, 1);
    group.settings = g.settings(kind.settings, cat("optimizer.groups[", i, "] ", kind.name));
  }
}

inline nlohmann::json optimizer_groups_json(const std::vector<OptimizerGroup>& groups) {
  nlohmann::json out = nlohmann::json::array();
  for (const OptimizerGroup& g : groups) {
    nlohmann::json j = attributes_json(g.settings);
    j.update({{"params", g.params}, {"kind", g.kind}, {"learning_rate", g.learning_rate}, {"momentum", g.momentum}});
    out.push_back(std::move(j));
  }
  return out;
}

// The optimizer section's schedule (train/optim/schedule.h: learning rate, warm-up, decay,
// momentum ramp) and max-norm rule (train/optim/constraints.h), as pens train and pens
// pretrain configs both spell them.
inline void read_schedule(ConfigSection& s, Schedule& sc, std::string& max_norm_rule, const std::string& source) {
  s.number("learning_rate", sc.learning_rate, 0, 1e3);
  s.number("warmup_epochs", sc.warmup_epochs, 0, 1e6);
  s.number("decay", sc.decay, 0, 1);
  s.number("decay_start_epoch", sc.decay_start_epoch, 0, 1e6);
  s.number("anneal_start_epoch", sc.anneal_start_epoch, 0, 1e6);
  s.number("anneal_end_epoch", sc.anneal_end_epoch, 0, 1e6);
  if (sc.anneal_end_epoch > 0 && !(sc.anneal_start_epoch < sc.anneal_end_epoch)) {
    fail(source, ": optimizer.anneal_start_epoch (", sc.anneal_start_epoch, ") must be below anneal_end_epoch (",
         sc.anneal_end_epoch, ")");
  }
  s.number("momentum_start", sc.momentum_start, 0, 1);
  s.number("momentum_end", sc.momentum_end, 0, 1);
  s.number("momentum_epochs", sc.momentum_epochs, 0, 1e6);
  s.string("max_norm_rule", max_norm_rule);
  try {
    parse_max_norm_rule(max_norm_rule);
  } catch (const Error& e) {
    fail(source, ": optimizer.max_norm_rule: ", e.what());
  }
}

inline nlohmann::json schedule_json(const Schedule& sc, const std::string& max_norm_rule) {
  return {{"learning_rate", sc.learning_rate},     {"warmup_epochs", sc.warmup_epochs},
          {"decay", sc.decay},                     {"decay_start_epoch", sc.decay_start_epoch},
          {"anneal_start_epoch", sc.anneal_start_epoch},
          {"anneal_end_epoch", sc.anneal_end_epoch}, {"momentum_start", sc.momentum_start},
          {"momentum_end", sc.momentum_end},       {"momentum_epochs", sc.momentum_epochs},
          {"max_norm_rule", max_norm_rule}};
}

// The optimizer section classifier and tree configs share, read into and written from the
// config's members of the same names: the kind and its own settings, the schedule, the
// max-norm rule and the gradient transforms, and the fields of one kind of config alone
// (`extra`: a tree config's periodic restarts).
template <class Config>
void read_optimizer_section(ConfigSection& top, Config& c, const std::string& source,
                            std::span<const ConfigField<Config>> extra = {}) {
  const nlohmann::json* o = top.child("optimizer");
  if (!o) {
    normalize_attrs(configured_optimizer(c.optimizer, source).settings, c.optimizer_settings, "optimizer");
    return;
  }
  ConfigSection s(*o, "optimizer", source);
  s.string("kind", c.optimizer);
  const OptimizerKind& kind = configured_optimizer(c.optimizer, source);
  read_schedule(s, c.schedule, c.max_norm_rule, source);
  read_fields(s, c, extra);
  read_transforms(s, c.transforms, source);
  read_optimizer_groups(s, c.optimizer_groups, source);
  c.optimizer_settings = s.settings(kind.settings, "optimizer " + kind.name);
}

template <class Config>
nlohmann::json optimizer_section_json(const Config& c, std::span<const ConfigField<Config>> extra = {}) {
  nlohmann::json o = attributes_json(c.optimizer_settings);
  o.update(schedule_json(c.schedule, c.max_norm_rule));
  write_fields(o, c, extra);
  o["kind"] = c.optimizer;
  o["transforms"] = transforms_json(c.transforms);
  if (!c.optimizer_groups.empty()) o["groups"] = optimizer_groups_json(c.optimizer_groups);
  return o;
}

// The epochs and scale of one lambda_schedule stage (MNIST and tree configs).
inline LambdaStage read_lambda_stage(ConfigSection& s) {
  LambdaStage stage;
  s.number("epochs", stage.epochs, 1e-9, 1e9);
  s.number("scale", stage.scale, 0, 1e9);
  return stage;
}

}  // namespace pens
