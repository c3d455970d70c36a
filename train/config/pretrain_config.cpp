#include "pens/train/config/pretrain_config.h"

#include "pens/ops/registry.h"
#include "pens/serialization/model_file.h"
#include "pens/train/config/config_reader.h"

namespace pens {

using nlohmann::json;

namespace {

// The run section's fields (config_reader.h; no epochs: each layer has its own).
const ConfigField<PretrainConfig> kPretrainRunFields[] = {
    {"steps_per_epoch", &PretrainConfig::steps_per_epoch, 1, 1e9},
    {"seed", &PretrainConfig::seed, 0, kConfigHuge},
    {"init_seed", &PretrainConfig::init_seed, 0, kConfigHuge},
    {"threads", &PretrainConfig::threads, 0, 1024},
    {"budget_minutes", &PretrainConfig::budget_minutes, 0, 1e9}};

}  // namespace

PretrainConfig parse_pretrain_config(const json& j, const std::string& source) {
  PretrainConfig c;
  ConfigSection top(j, "", source);
  top.string("description", c.description);
  top.required_string("model", c.model, "model file");
  if (const json* d = top.child("data")) {
    ConfigSection s(*d, "data", source);
    s.string("dir", c.data_dir);
  }
  const json* layers = top.child("layers");
  if (!layers || !layers->is_array() || layers->empty()) {
    fail(source, ": layers must be a non-empty array of {node, corruption, epochs, l1, sparsity, weight_noise}");
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    const std::string where = cat("layers[", i, "]");
    ConfigSection s((*layers)[i], where, source);
    PretrainLayer layer;
    s.string("node", layer.autoencoder.node);
    if (layer.autoencoder.node.empty()) fail(source, ": ", where, ".node names no node");
    s.number("epochs", layer.epochs, 1, 1e9);
    s.number("l1", layer.autoencoder.l1, 0, 1e6);
    s.number("sparsity", layer.autoencoder.sparsity, 0, 1e6);
    s.number("weight_noise", layer.autoencoder.weight_noise, 0, 1e6);
    if (const json* noise = s.child("corruption")) {
      Node input;  // corruption applies to a real input
      input.name = where + ".corruption";
      input.op = &OpRegistry::global().at("input");
      layer.autoencoder.corruption = read_noise_list(*noise, source, where + ".corruption", input);
    }
    c.layers.push_back(std::move(layer));
  }
  top.number("batch", c.batch, 1, 1e6);
  if (const json* o = top.child("optimizer")) {
    ConfigSection s(*o, "optimizer", source);
    // "momentum" is a constant one: both ends of the ramp.
    if (o->contains("momentum")) {
      if (o->contains("momentum_start") || o->contains("momentum_end")) {
        fail(source, ": optimizer: give either momentum (constant) or momentum_start and momentum_end, not both");
      }
      s.number("momentum", c.schedule.momentum_start, 0, 1);
      c.schedule.momentum_end = c.schedule.momentum_start;
    }
    read_schedule(s, c.schedule, c.max_norm_rule, source);
  }
  read_section<PretrainConfig>(top, "run", c, kPretrainRunFields, source);
  read_checkpoint_section(top, c, source);
  return c;
}

json to_json(const PretrainConfig& c) {
  json layers = json::array();
  for (const PretrainLayer& l : c.layers) {
    layers.push_back({{"node", l.autoencoder.node},
                      {"corruption", noise_list_json(l.autoencoder.corruption)},
                      {"epochs", l.epochs},
                      {"l1", l.autoencoder.l1},
                      {"sparsity", l.autoencoder.sparsity},
                      {"weight_noise", l.autoencoder.weight_noise}});
  }
  return {{"description", c.description},
          {"model", c.model},
          {"data", {{"dir", c.data_dir}}},
          {"layers", layers},
          {"batch", c.batch},
          {"optimizer", schedule_json(c.schedule, c.max_norm_rule)},
          {"run", section_json<PretrainConfig>(c, kPretrainRunFields)},
          {"checkpoint", checkpoint_section_json(c)}};
}

}  // namespace pens
