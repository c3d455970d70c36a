#include "models/pretrain.h"

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "autodiff/tape.h"
#include "graph/error.h"
#include "graph/noise.h"
#include "graph/pseudo_ensemble.h"
#include "models/config_section.h"
#include "models/optimizer.h"
#include "models/report.h"
#include "serialization/files.h"
#include "serialization/model_file.h"
#include "serialization/sha256.h"

namespace pens {

namespace {

using nlohmann::json;

// Copies a parameter node of `from` into `to` under the same name, attributes and flags.
NodeId copy_param(Graph& to, const Graph& from, NodeId p) {
  const NodeId v = to.add("parameter", {}, from[p].attrs, from[p].name);
  to.node(v).layer = from[p].layer;
  to.node(v).flags = from[p].flags;
  return v;
}

// The rows of `d` as the network computes them at `node`, clean (noise ignored): the
// input of a layer above the first.
Dataset codes_at(const Graph& network, ParamStore<float>& params, const std::string& input,
                 const std::string& node, const Dataset& d) {
  const Graph inference = build_inference(network, 0);
  constexpr int64_t kBatchRows = 500;
  Tape<float> tape(inference, params, {.batch = kBatchRows});
  Dataset out;
  out.size = d.size;
  out.dim = tape.info(node).shape.cols();
  out.x.resize(static_cast<size_t>(out.size * out.dim));
  for_each_batch(d, kBatchRows, [&](std::span<const int64_t> rows, int64_t first, int64_t n) {
    gather_rows(d, rows, 0, tape.input(input), {});
    tape.forward();
    Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
        out.x.data() + first * out.dim, n, out.dim) = tape.value(node).mat().topRows(n);
  });
  return out;
}

// The network's one real input: where the examples go.
std::string real_input(const Graph& g, const std::string& model_path) {
  std::string found;
  for (NodeId v : g.nodes()) {
    if (g[v].op->name != "input" || g[v].attrs.get_string("dtype") == "index") continue;
    if (!found.empty()) fail(model_path, ": pre-training needs one real input; found '", found, "' and '", g[v].name, "'");
    found = g[v].name;
  }
  if (found.empty()) fail(model_path, ": no real input to feed the examples to");
  return found;
}

// Mean over the rows of `d` of ‖recon − x‖² for the autoencoder without corruption (its
// inference graph: the decoder's output only).
double reconstruction_error(Tape<float>& tape, const Dataset& d) {
  double sum = 0;
  for_each_batch(d, tape.batch(), [&](std::span<const int64_t> rows, int64_t first, int64_t n) {
    gather_rows(d, rows, 0, tape.input("x"), {});
    tape.forward();
    const auto recon = tape.value("recon").mat();
    for (int64_t r = 0; r < n; ++r) {
      const Eigen::Map<const Eigen::RowVectorXf> clean(d.x.data() + (first + r) * d.dim, d.dim);
      sum += (recon.row(r) - clean).squaredNorm();
    }
  });
  return d.size > 0 ? sum / static_cast<double>(d.size) : std::nan("");
}

// Mean over the rows of `d` of the denoising error the training graph computes
// (corrupted input, clean target), with the corruption of each batch fixed by `seed`
// alone so that epochs are compared on the same noise.
double denoising_error(Tape<float>& tape, const Dataset& d, uint64_t seed) {
  double sum = 0;
  for_each_batch(d, tape.batch(), [&](std::span<const int64_t> rows, int64_t first, int64_t n) {
    gather_rows(d, rows, 0, tape.input("x"), {});
    gather_rows(d, rows, 0, tape.input("target"), {});
    tape.set_noise_key({seed, (uint64_t{1} << 62) + static_cast<uint64_t>(first)});
    tape.forward();
    sum += tape.value("loss/c1/recon_error").arr().head(n).sum();
  });
  return d.size > 0 ? sum / static_cast<double>(d.size) : std::nan("");
}

bool all_finite(std::span<const float> v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

}  // namespace

Model denoising_autoencoder(const Graph& network, const AutoencoderSpec& spec) {
  const NodeId affine = network.at(spec.node);
  if (network[affine].op->name != "affine") {
    fail("autoencoder layer '", spec.node, "': the encoder must be an affine node, it is ", network[affine].op->name);
  }
  const std::vector<NodeId> consumers = network.consumers(affine);
  if (consumers.size() != 1 || network.inputs(consumers[0]).size() != 1) {
    fail("autoencoder layer '", spec.node, "': its value must feed exactly one activation (a one-input op)");
  }
  const NodeId activation = consumers[0];
  const std::vector<NodeId> in = network.inputs(affine);  // x, W, b
  const std::vector<int64_t> w_shape = network[in[1]].attrs.get_ints("shape");
  const int64_t n_in = w_shape[0];

  Model ae;
  Graph& g = ae.graph;
  const NodeId x = g.input("x", {kBatch, n_in});
  g.node(x).layer = "in";
  for (const NoiseAnnotation& a : spec.corruption) add_noise(g, x, a.kind, a.params);
  const NodeId target = g.input("target", {kBatch, n_in});
  const NodeId w = copy_param(g, network, in[1]);
  const NodeId b = copy_param(g, network, in[2]);
  const NodeId visible_bias = g.param(spec.node + "/visible_bias", {n_in}, {{"init", std::string("zeros")}});
  const NodeId a = g.add("affine", {x, w, b}, network[affine].attrs, network[affine].name);
  const NodeId code = g.add(network[activation].op->name, {a}, network[activation].attrs, network[activation].name);
  g.node(a).layer = g.node(code).layer = "code";
  const NodeId decoded = g.add("matmul", {code, w}, {{"transpose_b", int64_t{1}}}, "decoded");
  const NodeId recon = g.add("add", {decoded, visible_bias}, {}, "recon");
  g.node(decoded).layer = g.node(recon).layer = "recon";
  g.set_flag(recon, kOutput);
  const NodeId err = g.add("squared_error", {recon, target}, {}, "recon_error");
  g.set_flag(g.add("mean", {err}, {}, "reconstruction"), kLoss);
  if (spec.l1 > 0) {
    const NodeId per_row = g.add("sum", {g.add("abs", {code}, {}, "code_abs")}, {{"axes", std::vector<int64_t>{1}}}, "code_l1");
    const NodeId mean = g.add("mean", {per_row}, {}, "code_l1_mean");
    g.set_flag(g.add("scale", {mean}, {{"factor", spec.l1}}, "activity_l1"), kLoss);
  }
  PseudoEnsembleSpec one_child;
  one_child.children = 1;
  one_child.loss_on = "child";
  ae.ensemble = one_child;
  ae.metadata = {{"description", cat("denoising autoencoder of layer ", spec.node, " (pens pretrain)")}};
  return ae;
}

PretrainConfig parse_pretrain_config(const json& j, const std::string& source) {
  PretrainConfig c;
  Section top(j, "", source);
  top.string("description", c.description);
  top.string("model", c.model);
  if (c.model.empty()) fail(source, ": the config names no model file (field \"model\")");
  if (const json* d = top.child("data")) {
    Section s(*d, "data", source);
    s.string("dir", c.data_dir);
  }
  const json* layers = top.child("layers");
  if (!layers || !layers->is_array() || layers->empty()) {
    fail(source, ": layers must be a non-empty array of {node, corruption, epochs, l1}");
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    const std::string where = cat("layers[", i, "]");
    Section s((*layers)[i], where, source);
    PretrainLayer layer;
    s.string("node", layer.autoencoder.node);
    if (layer.autoencoder.node.empty()) fail(source, ": ", where, ".node names no node");
    s.number("epochs", layer.epochs, 1, 1e9);
    s.number("l1", layer.autoencoder.l1, 0, 1e6);
    if (const json* noise = s.child("corruption")) {
      Node input;  // corruption applies to a real input
      input.name = where + ".corruption";
      layer.autoencoder.corruption = read_noise_list(*noise, source, where + ".corruption", input);
    }
    c.layers.push_back(std::move(layer));
  }
  top.number("batch", c.batch, 1, 1e6);
  if (const json* o = top.child("optimizer")) {
    Section s(*o, "optimizer", source);
    s.number("learning_rate", c.learning_rate, 0, 1e3);
    s.number("decay", c.decay, 0, 1);
    s.number("momentum", c.momentum, 0, 1);
  }
  if (const json* r = top.child("run")) {
    Section s(*r, "run", source);
    s.number("steps_per_epoch", c.steps_per_epoch, 1, 1e9);
    s.number("seed", c.seed, 0, kConfigHuge);
    s.number("init_seed", c.init_seed, 0, kConfigHuge);
    s.number("threads", c.threads, 1, 1024);
  }
  return c;
}

json to_json(const PretrainConfig& c) {
  json layers = json::array();
  for (const PretrainLayer& l : c.layers) {
    layers.push_back({{"node", l.autoencoder.node},
                      {"corruption", noise_list_json(l.autoencoder.corruption)},
                      {"epochs", l.epochs},
                      {"l1", l.autoencoder.l1}});
  }
  return {{"description", c.description},
          {"model", c.model},
          {"data", {{"dir", c.data_dir}}},
          {"layers", layers},
          {"batch", c.batch},
          {"optimizer", {{"learning_rate", c.learning_rate}, {"decay", c.decay}, {"momentum", c.momentum}}},
          {"run", {{"steps_per_epoch", c.steps_per_epoch}, {"seed", c.seed}, {"init_seed", c.init_seed}, {"threads", c.threads}}}};
}

TrainSummary pretrain(const PretrainConfig& config, const Dataset& images, const std::string& out_dir,
                      TrainObserver& observer) {
  namespace fs = std::filesystem;
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  Eigen::setNbThreads(config.threads);
  fs::create_directories(out_dir);
  const auto out = [&](const std::string& name) { return (fs::path(out_dir) / name).string(); };

  Model model = load_model(config.model);
  if (!model.values) {
    model.values = std::make_shared<ParamStore<float>>(model.graph);
    model.values->initialize(model.graph, config.init_seed);
  }
  ParamStore<float>& params = *model.values;
  // Reconstruction is watched on a fixed sample of the images, clean.
  std::vector<int64_t> watched(static_cast<size_t>(std::min<int64_t>(images.size, 10000)));
  for (size_t i = 0; i < watched.size(); ++i) watched[i] = static_cast<int64_t>(i);
  const Dataset watched_images = subset(images, watched);
  std::ofstream metrics(out("metrics.jsonl"), std::ios::trunc);
  if (!metrics) fail(out("metrics.jsonl"), ": cannot write");

  TrainSummary summary;
  json layers_summary = json::array();
  std::string diverged;
  int64_t global_step = 0;
  for (size_t li = 0; li < config.layers.size() && diverged.empty(); ++li) {
    const PretrainLayer& layer = config.layers[li];
    const std::string& name = layer.autoencoder.node;
    if (!model.graph.find(name)) fail(config.model, ": pretrain layer '", name, "' is not a node of the model");
    const Model ae = denoising_autoencoder(model.graph, layer.autoencoder);

    // The layer's input: the images for a first layer, else the clean code of the layers
    // below (already pre-trained: layers go bottom-up).
    const std::string& weights = model.graph[model.graph.inputs(model.graph.at(name))[1]].name;
    const std::string input = model.graph[model.graph.inputs(model.graph.at(name))[0]].name;
    const bool first_layer = is_input(model.graph[input]);
    const std::string examples = real_input(model.graph, config.model);
    const Dataset train_rows = first_layer ? Dataset{} : codes_at(model.graph, params, examples, input, images);
    const Dataset watched_rows = first_layer ? Dataset{} : codes_at(model.graph, params, examples, input, watched_images);
    const Dataset& data = first_layer ? images : train_rows;
    const int64_t n_in = model.graph[weights].attrs.get_ints("shape")[0];
    if (data.dim != n_in) fail(config.model, ": layer ", name, " takes ", n_in, " inputs, the data has ", data.dim);
    const Dataset& watched = first_layer ? watched_images : watched_rows;

    ParamStore<float> ae_params(ae.graph);
    ae_params.initialize(ae.graph, config.init_seed);
    for (const ParamEntry& e : ae_params.entries()) {
      if (params.find(e.name)) ae_params.value(e).arr() = params.value(e.name).arr();
    }
    const Graph training = build_pseudo_ensemble(ae.graph, *ae.ensemble, {.seed = config.seed});
    Sgd sgd(ae.graph, ae_params);
    Tape<float> step_tape(training, ae_params, {.batch = config.batch});
    Tape<float> eval_tape(build_inference(ae.graph, 0), ae_params, {.batch = 500});
    Tape<float> denoise_tape(training, ae_params, {.batch = 500});
    const auto watch = [&](json m) {
      m["denoising_error"] = denoising_error(denoise_tape, watched, config.seed);
      m["clean_reconstruction"] = reconstruction_error(eval_tape, watched);
      m["elapsed_seconds"] = elapsed();
      metrics << m.dump() << "\n" << std::flush;
      return m;
    };
    std::vector<int64_t> all(static_cast<size_t>(data.size));
    for (int64_t i = 0; i < data.size; ++i) all[static_cast<size_t>(i)] = i;
    Cycler cycler(all, config.seed, 5000 + 1000 * li);
    observer.on_message(cat("layer ", name, ": denoising autoencoder ", data.dim, " -> ", params.value(weights).shape.cols(),
                            " -> ", data.dim, " on ", data.size, " rows, ", layer.epochs, " epochs"));

    const json initial = watch({{"layer", name}, {"epoch", 0}});
    json last = initial;
    std::vector<int64_t> rows;
    const int64_t total = layer.epochs * config.steps_per_epoch;
    for (int64_t epoch = 0; epoch < layer.epochs && diverged.empty(); ++epoch) {
      double objective_sum = 0;
      const double lr = config.learning_rate * std::pow(config.decay, static_cast<double>(epoch));
      for (int64_t s = 0; s < config.steps_per_epoch; ++s) {
        const int64_t step = epoch * config.steps_per_epoch + s;
        cycler.take(step * config.batch, config.batch, rows);
        gather_rows(data, rows, 0, step_tape.input("x"), {});
        gather_rows(data, rows, 0, step_tape.input("target"), {});
        step_tape.set_noise_key({config.seed, static_cast<uint64_t>(global_step++)});
        step_tape.forward();
        const double objective = step_tape.objective();
        if (!std::isfinite(objective)) {
          diverged = cat("pre-training diverged at layer ", name, ", step ", step, ": the objective is ", objective);
          break;
        }
        ae_params.zero_grad();
        step_tape.backward();
        sgd.step(lr, config.momentum);
        objective_sum += objective;
        observer.on_step(step + 1, total, static_cast<double>(step + 1) / static_cast<double>(config.steps_per_epoch),
                         objective, elapsed());
      }
      if (!diverged.empty()) break;
      if (!all_finite(ae_params.values())) {
        diverged = cat("pre-training diverged at layer ", name, ", epoch ", epoch + 1, ": a parameter is not finite");
        break;
      }
      last = watch({{"layer", name},
                    {"epoch", epoch + 1},
                    {"learning_rate", lr},
                    {"objective", objective_sum / static_cast<double>(config.steps_per_epoch)}});
      observer.on_eval(last);
    }
    if (!diverged.empty()) break;
    for (const ParamEntry& e : ae_params.entries()) {
      if (params.find(e.name)) params.value(e.name).arr() = ae_params.value(e).arr();
    }
    layers_summary.push_back({{"layer", name},
                              {"denoising_error", {initial["denoising_error"], last["denoising_error"]}},
                              {"clean_reconstruction", {initial["clean_reconstruction"], last["clean_reconstruction"]}}});
  }

  summary.diverged = !diverged.empty();
  if (summary.diverged) {
    observer.on_message(diverged + "; model.json not written");
  } else {
    model.metadata["pretrained"] = {{"config_hash", sha256_hex(to_json(config).dump()).substr(0, 16)}, {"layers", layers_summary}};
    save_model(model, out("model.json"));
  }
  summary.json = {{"status", summary.diverged ? "diverged" : "finished"},
                  {"wall_seconds", elapsed()},
                  {"config", to_json(config)},
                  {"layers", layers_summary}};
  if (summary.diverged) summary.json["message"] = diverged;
  write_file_atomically(out("summary.json"), summary.json.dump(2) + "\n");
  if (!summary.diverged) {
    for (const std::string& problem : write_filter_image(out_dir, model)) observer.on_message(problem);
  }
  return summary;
}

}  // namespace pens
