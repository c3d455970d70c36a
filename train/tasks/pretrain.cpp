#include "pens/train/tasks/pretrain.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "pens/autodiff/tape.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/serialization/model_file.h"
#include "pens/serialization/sha256.h"
#include "pens/train/loop/report.h"
#include "pens/train/loop/run_folder.h"
#include "pens/train/loop/run_loop.h"
#include "pens/train/loop/step.h"
#include "pens/train/optim/schedule.h"
#include "pens/train/tasks/evaluation.h"
#include "pens/train/tasks/trainer.h"

namespace pens {

namespace {

using nlohmann::json;

// The rows of `d` as the network computes them at `node`, clean (noise ignored): the
// input of a layer above the first.
Dataset codes_at(const Graph& network, ParamStore<float>& params, const std::string& input,
                 const std::string& node, const Dataset& d) {
  const Graph inference = build_inference(network);
  constexpr int64_t kBatchRows = 500;
  Tape<float> tape(inference, params, {.batch = kBatchRows});
  Dataset out = make_dataset(d.size, tape.info(node).shape.cols(), 0, cat("the codes of '", node, "'"));
  for_each_batch(d, kBatchRows, [&](std::span<const int64_t> rows, int64_t first, int64_t n) {
    gather_rows(d, rows, 0, tape.input(input), {});
    tape.forward();
    Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
        out.x.data() + first * out.dim, n, out.dim) = tape.value(node).mat().topRows(n);
  });
  return out;
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

// Mean over the rows of `d` of the per-row denoising error `node` of the training graph
// (corrupted input, clean target), with the corruption of each batch fixed by `seed`
// alone so that epochs are compared on the same noise.
double denoising_error(Tape<float>& tape, const std::string& node, const Dataset& d, uint64_t seed) {
  double sum = 0;
  for_each_batch(d, tape.batch(), [&](std::span<const int64_t> rows, int64_t first, int64_t n) {
    gather_rows(d, rows, 0, tape.input("x"), {});
    gather_rows(d, rows, 0, tape.input("target"), {});
    tape.set_noise_key({seed, (uint64_t{1} << 62) + static_cast<uint64_t>(first)});
    tape.forward();
    sum += tape.value(node).arr().head(n).sum();
  });
  return d.size > 0 ? sum / static_cast<double>(d.size) : std::nan("");
}

// Copies the optimizer state of the parameters both stores hold from `from` (over
// from_params) into `to` (over to_params), two optimizers of one kind: every buffer.
void copy_state(Optimizer& from, const ParamStore<float>& from_params, Optimizer& to,
                const ParamStore<float>& to_params) {
  const std::vector<StateBuffer> source = from.state(), target = to.state();
  for (size_t b = 0; b < source.size(); ++b) {
    for (const ParamEntry& e : from_params.entries()) {
      const ParamEntry* t = to_params.find(e.name);
      if (!t) continue;
      std::copy_n(source[b].values.data() + e.offset, e.shape.numel(), target[b].values.data() + t->offset);
    }
  }
}

// Greedy pre-training on the run loop: a stage per layer, each layer's autoencoder
// trained on the clean code of the layers below it (already pre-trained), in a store of
// its own with an optimizer of its own (what a layer costs is its own parameters). What a
// checkpoint keeps is one store over the network and every layer's decoder, with one
// optimizer state over it: the layer's values and state are gathered there when the loop
// checkpoints and when the next layer starts, and a layer resumed inside takes its own
// back from there.
class PretrainTask : public RunTask {
 public:
  PretrainTask(const PretrainConfig& config, const Dataset& images, TrainObserver& observer);

  RunLength length() const override {
    const int64_t steps = config_.steps_per_epoch;
    return {.steps_per_epoch = steps,
            .epochs = starts_.back() / steps,  // the layers' one after another
            .eval_every = steps,
            .checkpoint_every = steps_in(config_.checkpoint_every_epochs, steps),
            .budget_minutes = config_.budget_minutes,
            .checkpoint_keep = config_.checkpoint_keep,
            .seed = config_.seed,
            .keeps_best = false};
  }
  json config() const override { return to_json(config_); }
  json as_read(const json& c, const std::string& where) const override {
    return to_json(parse_pretrain_config(c, where));
  }
  Model& model() override { return store_; }
  Optimizer& optimizer() override { return *sgd_; }
  const Model& saved_model() override;
  StepResult step(int64_t step) override;
  json evaluate(int64_t done, const TrainingWindow& window) override;
  json begin_stage(int64_t step) override;
  void recall(const json& m) override { remember(m); }
  void gather_state() override;
  void summarize(json& summary, const json& /*last*/, const json& /*best*/) const override {
    summary["layers"] = layers_summary();
  }

 private:
  // The autoencoder of the layer being trained, and what it trains on.
  struct Layer {
    size_t index = 0;
    Model autoencoder;
    std::unique_ptr<ParamStore<float>> params;
    std::unique_ptr<Optimizer> sgd;
    PseudoEnsemble training;
    Dataset codes, watched_codes;  // above the first layer: the clean code of the layers below
    const Dataset* data = nullptr;
    const Dataset* watched = nullptr;
    std::unique_ptr<Step> step;
    std::unique_ptr<Tape<float>> step_tape, eval_tape, denoise_tape;
    std::unique_ptr<Cycler> cycler;
  };

  int64_t first_step(size_t layer) const { return starts_[layer]; }
  size_t layer_at(int64_t step) const {  // the layer that step `step` trains
    const auto after = std::upper_bound(starts_.begin() + 1, starts_.end() - 1, step);
    return static_cast<size_t>(after - starts_.begin()) - 1;
  }
  // The current layer, set up when it is another: afresh (its start), or where the
  // checkpointed store holds it (a resumed run).
  Layer& layer(size_t index, bool fresh = false);
  json watched(json m);  // adds the layer's errors on the watched rows
  void remember(const json& m);
  json layers_summary() const;

  const PretrainConfig& config_;
  const Dataset& images_;
  TrainObserver& observer_;
  std::vector<int64_t> starts_;  // the first step of each layer, then the run's length
  Model network_;
  std::string examples_;
  Dataset watched_images_;
  Model store_;  // the network's graph with every layer's decoder parameters added
  std::unique_ptr<Optimizer> sgd_;  // SGD's state over store_, as checkpoints keep it
  std::unique_ptr<Layer> current_;
  std::vector<int64_t> rows_;
  std::map<std::string, std::pair<json, json>> seen_;  // by layer: its first and its latest line
};

PretrainTask::PretrainTask(const PretrainConfig& config, const Dataset& images, TrainObserver& observer)
    : config_(config), images_(images), observer_(observer), starts_{0} {
  for (const PretrainLayer& l : config.layers) starts_.push_back(starts_.back() + l.epochs * config.steps_per_epoch);
  set_threads(config.threads);
  network_ = load_model(config.model);
  start_values(network_, config.init_seed, "");
  examples_ = classifier_io(network_.graph, config.model, false).x;
  // Reconstruction is watched on a fixed sample of the images, clean.
  std::vector<int64_t> watched(static_cast<size_t>(std::min<int64_t>(images.size, 10000)));
  for (size_t i = 0; i < watched.size(); ++i) watched[i] = static_cast<int64_t>(i);
  watched_images_ = subset(images, watched);
  const Graph& net = network_.graph;
  store_.graph = net;
  for (const PretrainLayer& l : config.layers) {
    if (!net.find(l.autoencoder.node)) fail(config.model, ": pretrain layer '", l.autoencoder.node, "' is not a node of the model");
    const Model ae = denoising_autoencoder(net, l.autoencoder);
    for (NodeId v : ae.graph.nodes()) {
      const Node& n = ae.graph[v];
      if (!is_param(n) || store_.graph.find(n.name)) continue;
      store_.graph.node(store_.graph.add(n.op->name, {}, n.attrs, n.name)) = n;
    }
  }
  // The decoders start as a layer's own store would start them (parameters are drawn by
  // name), the network's parameters at its values.
  store_.values = std::make_unique<ParamStore<float>>(store_.graph);
  store_.values->initialize(store_.graph, config.init_seed);
  copy_shared_values(*store_.values, *network_.values, config.model);
  sgd_ = make_optimizer("sgd", *store_.values);
}

PretrainTask::Layer& PretrainTask::layer(size_t index, bool fresh) {
  if (current_ && current_->index == index && !fresh) return *current_;
  gather_state();  // the layer before: its values are the network's from here on
  current_.reset();
  auto l = std::make_unique<Layer>();
  l->index = index;
  const PretrainLayer& spec = config_.layers[index];
  const std::string& name = spec.autoencoder.node;
  const Graph& net = network_.graph;
  l->autoencoder = denoising_autoencoder(net, spec.autoencoder);
  const Graph& ae = l->autoencoder.graph;
  // Every parameter of the autoencoder is in the store: the network's encoder, and its
  // decoder as initialized (a fresh layer) or as trained so far (a resumed one).
  l->params = std::make_unique<ParamStore<float>>(ae);
  ParamStore<float>& params = *l->params;
  copy_shared_values(params, *store_.values, "the pre-training store");
  l->sgd = make_optimizer("sgd", params);
  if (!fresh) copy_state(*sgd_, *store_.values, *l->sgd, params);
  // The layer's input: the images for a first layer, else the clean code of the layers
  // below (already pre-trained: layers go bottom-up).
  const std::string& weights = net[net.inputs(net.at(name))[1]].name;
  const std::string input = net[net.inputs(net.at(name))[0]].name;
  const bool first_layer = is_input(net[input]);
  if (!first_layer) {
    l->codes = codes_at(net, *store_.values, examples_, input, images_);
    l->watched_codes = codes_at(net, *store_.values, examples_, input, watched_images_);
  }
  l->data = first_layer ? &images_ : &l->codes;
  l->watched = first_layer ? &watched_images_ : &l->watched_codes;
  const int64_t n_in = net[weights].attrs.get_ints("shape")[0];
  if (l->data->dim != n_in) fail(config_.model, ": layer ", name, " takes ", n_in, " inputs, the data has ", l->data->dim);
  l->training = build_pseudo_ensemble(ae, *l->autoencoder.ensemble);
  l->step = std::make_unique<Step>(params, *l->sgd, model_constraints(ae, params, parse_max_norm_rule(config_.max_norm_rule)),
                                   config_.seed);
  l->step_tape = std::make_unique<Tape<float>>(l->training.graph, params, CompileOptions{.batch = config_.batch});
  l->eval_tape = std::make_unique<Tape<float>>(build_inference(ae), params, CompileOptions{.batch = 500});
  l->denoise_tape = std::make_unique<Tape<float>>(l->training.graph, params, CompileOptions{.batch = 500});
  std::vector<int64_t> all(static_cast<size_t>(l->data->size));
  for (int64_t i = 0; i < l->data->size; ++i) all[static_cast<size_t>(i)] = i;
  l->cycler = std::make_unique<Cycler>(std::move(all), config_.seed, 5000 + 1000 * index);
  observer_.on_message(cat("layer ", name, ": denoising autoencoder ", l->data->dim, " -> ",
                           params.value(weights).shape.cols(), " -> ", l->data->dim, " on ", l->data->size, " rows, ",
                           spec.epochs, " epochs"));
  current_ = std::move(l);
  return *current_;
}

void PretrainTask::gather_state() {
  if (!current_) return;
  copy_shared_values(*store_.values, *current_->params, "the autoencoder of " + config_.layers[current_->index].autoencoder.node);
  copy_state(*current_->sgd, *current_->params, *sgd_, *store_.values);
}

json PretrainTask::begin_stage(int64_t step) {
  const size_t k = layer_at(step);
  if (step != first_step(k)) return nullptr;
  Layer& l = layer(k, true);  // with an optimizer of its own, afresh
  json m = watched({{"layer", config_.layers[l.index].autoencoder.node}, {"epoch", 0}, {"step", step}});
  remember(m);
  return m;
}

StepResult PretrainTask::step(int64_t step) {
  const size_t k = layer_at(step);
  Layer& l = layer(k);
  const int64_t s = step - first_step(k);  // the layer's own step
  // The schedule runs on the layer's own time, in fractional epochs (as a training run's):
  // each layer warms up and decays from its start; noise is keyed by the run's step.
  const double layer_time = static_cast<double>(s) / static_cast<double>(config_.steps_per_epoch);
  return l.step->run(config_.schedule.at(step, layer_time), *l.step_tape, [&](Tape<float>& tape, size_t) {
    l.cycler->take(s * config_.batch, config_.batch, rows_);
    gather_rows(*l.data, rows_, 0, tape.input("x"), {});
    gather_rows(*l.data, rows_, 0, tape.input("target"), {});
  });
}

json PretrainTask::evaluate(int64_t done, const TrainingWindow& window) {
  const size_t k = layer_at(done - 1);
  layer(k);
  const int64_t steps = done - first_step(k);
  json epoch = steps / config_.steps_per_epoch;  // whole epochs as integers, as before the loop
  if (steps % config_.steps_per_epoch != 0) epoch = static_cast<double>(steps) / static_cast<double>(config_.steps_per_epoch);
  const auto started = static_cast<double>((steps - 1) / config_.steps_per_epoch);  // the epoch's start
  json m = watched({{"layer", config_.layers[k].autoencoder.node},
                    {"epoch", epoch},
                    {"learning_rate", config_.schedule.learning_rate_at(started)},
                    {"objective", window.objective},
                    {"step", done}});
  remember(m);
  return m;
}

json PretrainTask::watched(json m) {
  Layer& l = *current_;
  const std::string& recon_error = l.training.loss_head.at("recon_error");
  m["denoising_error"] = denoising_error(*l.denoise_tape, recon_error, *l.watched, config_.seed);
  m["clean_reconstruction"] = reconstruction_error(*l.eval_tape, *l.watched);
  return m;
}

void PretrainTask::remember(const json& m) {
  if (!m.contains("layer")) return;
  auto [entry, added] = seen_.try_emplace(m["layer"].get<std::string>(), m, m);
  if (!added) entry->second.second = m;
}

json PretrainTask::layers_summary() const {
  json layers = json::array();
  for (const PretrainLayer& spec : config_.layers) {
    const auto found = seen_.find(spec.autoencoder.node);
    if (found == seen_.end()) continue;
    const auto& [first, latest] = found->second;
    layers.push_back({{"layer", spec.autoencoder.node},
                      {"denoising_error", {first["denoising_error"], latest["denoising_error"]}},
                      {"clean_reconstruction", {first["clean_reconstruction"], latest["clean_reconstruction"]}}});
  }
  return layers;
}

const Model& PretrainTask::saved_model() {
  copy_shared_values(*network_.values, *store_.values, "the pre-training store");
  network_.metadata["pretrained"] = {{"config_hash", sha256_hex(to_json(config_).dump()).substr(0, 16)},
                                     {"layers", layers_summary()}};
  return network_;
}

}  // namespace

TrainSummary pretrain(const PretrainConfig& config, const Dataset& images, const std::string& out_dir,
                      TrainObserver& observer, const Resume& resume) {
  return run_task([&] { return std::make_unique<PretrainTask>(config, images, observer); }, out_dir, observer, resume,
                  nullptr);
}

}  // namespace pens
