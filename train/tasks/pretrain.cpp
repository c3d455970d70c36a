#include "pens/train/tasks/pretrain.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "pens/autodiff/tape.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/serialization/model_file.h"
#include "pens/serialization/sha256.h"
#include "pens/train/loop/report.h"
#include "pens/train/loop/run_folder.h"
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

// Greedy pre-training, layer by layer: each layer's autoencoder trains on the clean code
// of the layers below it (already pre-trained), then hands its values to the network.
class Pretraining {
 public:
  Pretraining(const PretrainConfig& config, const Dataset& images, const std::string& out_dir, TrainObserver& observer)
      : config_(config), images_(images), folder_(out_dir), observer_(observer) {
    set_threads(config.threads);
    network_ = load_model(config.model);
    start_values(network_, config.init_seed, "");
    examples_ = classifier_io(network_.graph, config.model, false).x;
    // Reconstruction is watched on a fixed sample of the images, clean.
    std::vector<int64_t> watched(static_cast<size_t>(std::min<int64_t>(images.size, 10000)));
    for (size_t i = 0; i < watched.size(); ++i) watched[i] = static_cast<int64_t>(i);
    watched_images_ = subset(images, watched);
    folder_.start_metrics();
  }

  // Trains one layer; false when it diverged.
  bool train_layer(size_t index);
  TrainSummary finish();

 private:
  const PretrainConfig& config_;
  const Dataset& images_;
  RunFolder folder_;
  TrainObserver& observer_;
  Model network_;
  std::string examples_;
  Dataset watched_images_;
  json layers_summary_ = json::array();
  int64_t global_step_ = 0;  // noise keys run on across layers
  std::string diverged_;
};

bool Pretraining::train_layer(size_t index) {
  const PretrainLayer& layer = config_.layers[index];
  const std::string& name = layer.autoencoder.node;
  const Graph& net = network_.graph;
  ParamStore<float>& params = *network_.values;
  if (!net.find(name)) fail(config_.model, ": pretrain layer '", name, "' is not a node of the model");
  const Model ae = denoising_autoencoder(net, layer.autoencoder);

  // The layer's input: the images for a first layer, else the clean code of the layers
  // below (already pre-trained: layers go bottom-up).
  const std::string& weights = net[net.inputs(net.at(name))[1]].name;
  const std::string input = net[net.inputs(net.at(name))[0]].name;
  const bool first_layer = is_input(net[input]);
  const Dataset codes = first_layer ? Dataset{} : codes_at(net, params, examples_, input, images_);
  const Dataset watched_codes = first_layer ? Dataset{} : codes_at(net, params, examples_, input, watched_images_);
  const Dataset& data = first_layer ? images_ : codes;
  const Dataset& watched = first_layer ? watched_images_ : watched_codes;
  const int64_t n_in = net[weights].attrs.get_ints("shape")[0];
  if (data.dim != n_in) fail(config_.model, ": layer ", name, " takes ", n_in, " inputs, the data has ", data.dim);

  ParamStore<float> ae_params(ae.graph);
  ae_params.initialize(ae.graph, config_.init_seed);
  copy_shared_values(ae_params, params, config_.model);
  const PseudoEnsemble training = build_pseudo_ensemble(ae.graph, *ae.ensemble);
  const std::unique_ptr<Optimizer> sgd = make_optimizer("sgd", ae_params);
  Step step(ae_params, *sgd, model_constraints(ae.graph, ae_params, parse_max_norm_rule(config_.max_norm_rule)),
            config_.seed);
  const Schedule& schedule = config_.schedule;
  Tape<float> step_tape(training.graph, ae_params, {.batch = config_.batch});
  Tape<float> eval_tape(build_inference(ae.graph), ae_params, {.batch = 500});
  Tape<float> denoise_tape(training.graph, ae_params, {.batch = 500});
  const std::string& recon_error = training.loss_head.at("recon_error");
  const auto watch = [&](json m) {
    m["denoising_error"] = denoising_error(denoise_tape, recon_error, watched, config_.seed);
    m["clean_reconstruction"] = reconstruction_error(eval_tape, watched);
    m["elapsed_seconds"] = folder_.seconds();
    folder_.append_metrics(m);
    return m;
  };
  std::vector<int64_t> all(static_cast<size_t>(data.size));
  for (int64_t i = 0; i < data.size; ++i) all[static_cast<size_t>(i)] = i;
  Cycler cycler(all, config_.seed, 5000 + 1000 * index);
  observer_.on_message(cat("layer ", name, ": denoising autoencoder ", data.dim, " -> ",
                           params.value(weights).shape.cols(), " -> ", data.dim, " on ", data.size, " rows, ",
                           layer.epochs, " epochs"));

  const json initial = watch({{"layer", name}, {"epoch", 0}});
  json last = initial;
  std::vector<int64_t> rows;
  const int64_t total = layer.epochs * config_.steps_per_epoch;
  const auto feed = [&](Tape<float>& tape, int64_t s) {
    cycler.take(s * config_.batch, config_.batch, rows);
    gather_rows(data, rows, 0, tape.input("x"), {});
    gather_rows(data, rows, 0, tape.input("target"), {});
  };
  for (int64_t epoch = 0; epoch < layer.epochs; ++epoch) {
    double objective_sum = 0;
    for (int64_t s = epoch * config_.steps_per_epoch; s < (epoch + 1) * config_.steps_per_epoch; ++s) {
      // The schedule runs on the layer's own time, in fractional epochs (as a training
      // run's): each layer warms up and decays from its start.
      const double layer_time = static_cast<double>(s) / static_cast<double>(config_.steps_per_epoch);
      const StepResult r = step.run(schedule.at(global_step_++, layer_time), step_tape,
                                    [&](Tape<float>& tape, size_t) { feed(tape, s); });
      if (!r.finite) {
        diverged_ = cat("pre-training diverged at layer ", name, ", step ", s, ": ", r.problem);
        return false;
      }
      objective_sum += r.objective;
      observer_.on_step(s + 1, total, static_cast<double>(s + 1) / static_cast<double>(config_.steps_per_epoch),
                        r.objective, folder_.seconds());
    }
    if (!all_finite(ae_params.values())) {
      diverged_ = cat("pre-training diverged at layer ", name, ", epoch ", epoch + 1, ": a parameter is not finite");
      return false;
    }
    last = watch({{"layer", name},
                  {"epoch", epoch + 1},
                  {"learning_rate", schedule.learning_rate_at(static_cast<double>(epoch))},  // at its start
                  {"objective", objective_sum / static_cast<double>(config_.steps_per_epoch)}});
    observer_.on_eval(last);
  }
  copy_shared_values(params, ae_params, "the autoencoder of " + name);
  layers_summary_.push_back({{"layer", name},
                             {"denoising_error", {initial["denoising_error"], last["denoising_error"]}},
                             {"clean_reconstruction", {initial["clean_reconstruction"], last["clean_reconstruction"]}}});
  return true;
}

TrainSummary Pretraining::finish() {
  TrainSummary summary;
  summary.diverged = !diverged_.empty();
  if (summary.diverged) {
    observer_.on_message(diverged_ + "; model.json not written");
  } else {
    network_.metadata["pretrained"] = {{"config_hash", sha256_hex(to_json(config_).dump()).substr(0, 16)},
                                       {"layers", layers_summary_}};
    folder_.save_model(network_, "model.json");
  }
  summary.json = {{"status", summary.diverged ? "diverged" : "finished"},
                  {"wall_seconds", folder_.seconds()},
                  {"config", to_json(config_)},
                  {"layers", layers_summary_}};
  if (summary.diverged) summary.json["message"] = diverged_;
  folder_.write_summary(summary.json);
  if (!summary.diverged) {
    for (const std::string& problem : write_filter_image(folder_.dir(), network_)) observer_.on_message(problem);
  }
  return summary;
}

}  // namespace

TrainSummary pretrain(const PretrainConfig& config, const Dataset& images, const std::string& out_dir,
                      TrainObserver& observer) {
  Pretraining run(config, images, out_dir, observer);
  for (size_t i = 0; i < config.layers.size(); ++i) {
    if (!run.train_layer(i)) break;
  }
  return run.finish();
}

}  // namespace pens
