#include "models/trainer.h"

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "autodiff/tape.h"
#include "graph/error.h"
#include "models/config_section.h"
#include "models/optimizer.h"
#include "models/report.h"
#include "serialization/checkpoint.h"
#include "serialization/files.h"
#include "serialization/model_file.h"
#include "serialization/sha256.h"

namespace pens {

namespace {

using nlohmann::json;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The one real input (the examples) and the one index input (their labels) of a model.
struct ModelIo {
  std::string x, y, output;
};

ModelIo model_io(const Graph& g, const std::string& model_path) {
  ModelIo io;
  for (NodeId v : g.nodes()) {
    const Node& n = g[v];
    if (n.op->name == "input") {
      std::string& slot = n.attrs.get_string("dtype") == "index" ? io.y : io.x;
      if (!slot.empty()) fail(model_path, ": the trainer needs one real input (examples) and one index input (labels); found two of a kind: '", slot, "' and '", n.name, "'");
      slot = n.name;
    }
    if (n.flags & kOutput) {
      if (!io.output.empty()) fail(model_path, ": the trainer evaluates one output node; found '", io.output, "' and '", n.name, "'");
      io.output = n.name;
    }
  }
  if (io.x.empty() || io.y.empty()) fail(model_path, ": the trainer needs a real input (examples) and an index input (labels)");
  if (io.output.empty()) fail(model_path, ": no node is flagged as the output");
  return io;
}

// The error of the clean parent over a whole data set.
double error_of(Tape<float>& tape, const ModelIo& io, const Dataset& d) {
  if (d.size == 0) return std::nan("");
  const auto c = confusion_matrix(tape, io.x, io.output, d);
  int64_t right = 0;
  for (size_t i = 0; i < c.size(); ++i) right += c[i][i];
  return 1.0 - static_cast<double>(right) / static_cast<double>(d.size);
}

int64_t io_width(const Graph& g, const std::string& input) { return g[input].attrs.get_ints("shape").back(); }

bool all_finite(std::span<const float> v) {
  for (float x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

// The semi-supervised split of the config, or with data.labeled = 0 every non-validation
// example labeled.
Split training_split(const TrainConfig& config, const Dataset& train_set) {
  if (config.labeled > 0) return semi_supervised_split(train_set, config.labeled, config.validation, config.split_seed);
  if (config.validation >= train_set.size) {
    fail("data.validation = ", config.validation, " leaves none of the ", train_set.size, " training examples");
  }
  const std::vector<int64_t> order = permutation(train_set.size, config.split_seed, 1);
  Split split;
  split.validation.assign(order.begin(), order.begin() + config.validation);
  split.labeled.assign(order.begin() + config.validation, order.end());
  return split;
}

// What must match between a checkpoint's config and a resumed run's.
json resumable_part(json config) {
  for (const char* key : {"epochs", "budget_minutes", "threads"}) config["run"].erase(key);
  return config;
}

std::string config_hash(const TrainConfig& c) { return sha256_hex(to_json(c).dump()).substr(0, 16); }

}  // namespace

std::vector<std::vector<int64_t>> confusion_matrix(Tape<float>& tape, const std::string& x, const std::string& output,
                                                   const Dataset& d) {
  std::vector<std::vector<int64_t>> counts(static_cast<size_t>(d.classes), std::vector<int64_t>(static_cast<size_t>(d.classes), 0));
  for_each_batch(d, tape.batch(), [&](std::span<const int64_t> rows, int64_t first, int64_t n) {
    gather_rows(d, rows, 0, tape.input(x), {});
    tape.forward();
    auto scores = tape.value(output).mat();
    if (scores.cols() != d.classes) fail("the model's output '", output, "' has ", scores.cols(), " columns for ", d.classes, " classes");
    for (int64_t r = 0; r < n; ++r) {
      Eigen::Index best;
      scores.row(r).maxCoeff(&best);
      ++counts[static_cast<size_t>(d.y[static_cast<size_t>(first + r)])][static_cast<size_t>(best)];
    }
  });
  return counts;
}

std::string initialize_from(ParamStore<float>& params, const std::string& path) {
  if (!std::filesystem::exists(path)) fail(path, ": no such model file to initialize from (pens pretrain writes one)");
  const Model source = load_model(path);
  if (!source.values) fail(path, ": holds no parameter values to initialize from");
  std::vector<std::string> copied;
  for (const ParamEntry& e : params.entries()) {
    const ParamEntry* s = source.values->find(e.name);
    if (!s) continue;
    if (s->shape != e.shape) {
      fail(path, ": parameter '", e.name, "' has shape ", s->shape.str(), ", the model's has ", e.shape.str());
    }
    params.value(e).arr() = source.values->value(*s).arr();
    copied.push_back(e.name);
  }
  if (copied.empty()) fail(path, ": shares no parameter name with the model");
  std::string names;
  for (const std::string& n : copied) names += (names.empty() ? "" : ", ") + n;
  return cat("initialized ", copied.size(), " of ", params.entries().size(), " parameters from ", path, ": ", names);
}

TrainConfig parse_train_config(const json& j, const std::string& source) {
  TrainConfig c;
  Section top(j, "", source);
  top.string("description", c.description);
  top.string("model", c.model);
  if (c.model.empty()) fail(source, ": the config names no model file (field \"model\")");
  top.string("init_from", c.init_from);
  if (const json* d = top.child("data")) {
    Section s(*d, "data", source);
    s.string("dir", c.data_dir);
    s.number("labeled", c.labeled, 0, 1e9);
    s.number("validation", c.validation, 0, 1e9);
    s.number("split_seed", c.split_seed, 0, kConfigHuge);
  }
  if (const json* b = top.child("batch")) {
    Section s(*b, "batch", source);
    s.number("labeled", c.batch_labeled, 1, 1e6);
    s.number("unlabeled", c.batch_unlabeled, 0, 1e6);
  }
  if (const json* o = top.child("optimizer")) {
    Section s(*o, "optimizer", source);
    s.number("learning_rate", c.learning_rate, 0, 1e3);
    s.number("warmup_epochs", c.warmup_epochs, 0, 1e6);
    s.number("decay", c.decay, 0, 1);
    s.number("momentum_start", c.momentum_start, 0, 1);
    s.number("momentum_end", c.momentum_end, 0, 1);
    s.number("momentum_epochs", c.momentum_epochs, 0, 1e6);
    s.string("max_norm_rule", c.max_norm_rule);
    parse_max_norm_rule(c.max_norm_rule);
  }
  if (const json* l = top.child("lambda_schedule")) {
    if (!l->is_array()) fail(source, ": lambda_schedule must be an array of {epochs, scale}");
    c.lambda_schedule.emplace();
    for (size_t i = 0; i < l->size(); ++i) {
      Section s((*l)[i], cat("lambda_schedule[", i, "]"), source);
      LambdaStage stage;
      s.number("epochs", stage.epochs, 1e-9, 1e9);
      s.number("scale", stage.scale, 0, 1e9);
      c.lambda_schedule->push_back(stage);
    }
  }
  if (const json* r = top.child("run")) {
    Section s(*r, "run", source);
    s.number("epochs", c.epochs, 1, 1e9);
    s.number("steps_per_epoch", c.steps_per_epoch, 1, 1e9);
    s.number("budget_minutes", c.budget_minutes, 0, 1e9);
    s.number("seed", c.seed, 0, kConfigHuge);
    s.number("init_seed", c.init_seed, 0, kConfigHuge);
    s.number("threads", c.threads, 1, 1024);
  }
  if (const json* e = top.child("eval")) {
    Section s(*e, "eval", source);
    s.number("every_epochs", c.eval_every_epochs, 1e-6, 1e9);
    s.number("batch", c.eval_batch, 1, 1e6);
    s.number("train_error_examples", c.train_error_examples, 0, 1e9);
  }
  if (const json* k = top.child("checkpoint")) {
    Section s(*k, "checkpoint", source);
    s.number("every_epochs", c.checkpoint_every_epochs, 1e-6, 1e9);
  }
  return c;
}

json to_json(const TrainConfig& c) {
  json j = {
      {"description", c.description},
      {"model", c.model},
      {"init_from", c.init_from},
      {"data", {{"dir", c.data_dir}, {"labeled", c.labeled}, {"validation", c.validation}, {"split_seed", c.split_seed}}},
      {"batch", {{"labeled", c.batch_labeled}, {"unlabeled", c.batch_unlabeled}}},
      {"optimizer",
       {{"learning_rate", c.learning_rate}, {"warmup_epochs", c.warmup_epochs}, {"decay", c.decay},
        {"momentum_start", c.momentum_start}, {"momentum_end", c.momentum_end},
        {"momentum_epochs", c.momentum_epochs}, {"max_norm_rule", c.max_norm_rule}}},
      {"run",
       {{"epochs", c.epochs}, {"steps_per_epoch", c.steps_per_epoch}, {"budget_minutes", c.budget_minutes},
        {"seed", c.seed}, {"init_seed", c.init_seed}, {"threads", c.threads}}},
      {"eval", {{"every_epochs", c.eval_every_epochs}, {"batch", c.eval_batch}, {"train_error_examples", c.train_error_examples}}},
      {"checkpoint", {{"every_epochs", c.checkpoint_every_epochs}}},
  };
  if (c.lambda_schedule) {
    j["lambda_schedule"] = json::array();
    for (const LambdaStage& s : *c.lambda_schedule) j["lambda_schedule"].push_back({{"epochs", s.epochs}, {"scale", s.scale}});
  }
  return j;
}

TrainSummary train(const TrainConfig& config, const TrainData& data, const std::string& out_dir,
                   TrainObserver& observer, bool resume) {
  namespace fs = std::filesystem;
  const auto start = std::chrono::steady_clock::now();
  Eigen::setNbThreads(config.threads);
  fs::create_directories(out_dir);
  const auto out = [&](const std::string& name) { return (fs::path(out_dir) / name).string(); };

  // The model, its training graph and its evaluation graph.
  Model model = load_model(config.model);
  const ModelIo io = model_io(model.graph, config.model);
  const bool semi_supervised = config.batch_unlabeled > 0;
  PseudoEnsembleSpec spec;
  Graph training;
  if (model.ensemble) {
    spec = *model.ensemble;
    if (config.lambda_schedule) spec.lambda_schedule = *config.lambda_schedule;
    training = build_pseudo_ensemble(model.graph, spec,
                                     {.seed = config.seed, .labeled_rows = semi_supervised ? config.batch_labeled : -1});
  } else {
    if (semi_supervised) {
      fail(config.model, ": batch.unlabeled = ", config.batch_unlabeled,
           " but the model has no pseudo_ensemble section: nothing would read unlabeled rows");
    }
    training = model.graph;
  }
  const Graph inference = build_inference(model.graph, 0);
  if (!model.values) {
    model.values = std::make_shared<ParamStore<float>>(model.graph);
    model.values->initialize(model.graph, config.init_seed);
  }
  if (!config.init_from.empty()) observer.on_message(initialize_from(*model.values, config.init_from));
  ParamStore<float>& params = *model.values;
  Sgd sgd(model.graph, params, parse_max_norm_rule(config.max_norm_rule));
  const int64_t batch = config.batch_labeled + config.batch_unlabeled;
  Tape<float> step_tape(training, params, {.batch = batch});
  Tape<float> eval_tape(inference, params, {.batch = config.eval_batch});
  std::vector<std::string> loss_nodes;
  for (NodeId v : training.nodes_with(kLoss)) loss_nodes.push_back(training[v].name);

  // The split.
  const Dataset& train_set = data.train;
  if (train_set.dim != io_width(model.graph, io.x)) {
    fail(config.model, ": input '", io.x, "' takes ", io_width(model.graph, io.x), " features, the data has ", train_set.dim);
  }
  const Split split = training_split(config, train_set);
  const auto labeled = static_cast<int64_t>(split.labeled.size());
  const Dataset validation = subset(train_set, split.validation);
  const std::vector<int64_t> train_eval_rows(
      split.labeled.begin(), split.labeled.begin() + std::min<int64_t>(config.train_error_examples, labeled));
  const Dataset train_eval = subset(train_set, train_eval_rows);
  // The unlabeled pool: every training example outside the validation set, the labeled
  // ones included (their labels unused).
  std::vector<int64_t> pool = split.unlabeled;
  pool.insert(pool.end(), split.labeled.begin(), split.labeled.end());
  // Pass p of each cycler shuffles with stream base + p: the two bases keep their
  // streams apart (and apart from the split's stream 1) for any realistic run.
  Cycler labeled_rows(split.labeled, config.seed, 1000);
  Cycler unlabeled_rows(pool, config.seed, uint64_t{1} << 30);

  const json config_json = to_json(config);
  const std::string hash = config_hash(config);
  observer.on_message(cat("split ", config.split_seed, ": ", split.labeled.size(), " labeled, ",
                            split.unlabeled.size(), " unlabeled, ", split.validation.size(), " validation, ",
                            data.test.size, " test; ", params.numel(), " parameters; batch ", config.batch_labeled,
                            " labeled + ", config.batch_unlabeled, " unlabeled"));

  // Schedules, at fractional epoch t.
  const auto learning_rate = [&](double t) {
    const double warm = config.warmup_epochs > 0 ? std::min(1.0, t / config.warmup_epochs) : 1.0;
    return config.learning_rate * warm * std::pow(config.decay, t);
  };
  const auto momentum = [&](double t) {
    const double f = config.momentum_epochs > 0 ? std::min(1.0, t / config.momentum_epochs) : 1.0;
    return config.momentum_start + (config.momentum_end - config.momentum_start) * f;
  };
  const auto lambda_scale = [&](double t) { return model.ensemble ? spec.lambda_scale(t) : 1.0; };
  double lambda_set = -1;
  const auto set_lambdas = [&](double scale) {
    if (scale == lambda_set || !model.ensemble) return;
    for (const PenaltyTerm& term : spec.penalties) {
      step_tape.set_constant(cat("pen/", term.node, "/", term.kind, "/lambda"), static_cast<float>(term.lambda * scale));
    }
    lambda_set = scale;
  };

  const int64_t total_steps = config.epochs * config.steps_per_epoch;
  const auto eval_every = std::max<int64_t>(1, std::llround(config.eval_every_epochs * static_cast<double>(config.steps_per_epoch)));
  const auto checkpoint_every = std::max<int64_t>(1, std::llround(config.checkpoint_every_epochs * static_cast<double>(config.steps_per_epoch)));
  const std::string checkpoint_path = out("checkpoint.pens");
  std::map<std::string, double> loss_sums;
  double objective_sum = 0;
  int64_t window_steps = 0, last_good_checkpoint = -1;
  double window_start = 0;
  double best_validation = std::numeric_limits<double>::infinity();
  json best = nullptr, last = nullptr;
  std::string diverged;
  std::vector<int64_t> rows;
  int64_t step = 0;
  // Without a validation set the "best" parameters are the latest.
  const auto selection_error = [&](const json& m) {
    return validation.size > 0 ? m["validation_error"].get<double>() : -m["step"].get<double>();
  };

  std::string kept_metrics;
  if (resume) {
    if (!fs::exists(checkpoint_path)) fail(checkpoint_path, ": no checkpoint to resume from");
    const TrainingState state = load_checkpoint(checkpoint_path, params, sgd);
    if (resumable_part(state.config) != resumable_part(config_json)) {
      fail(checkpoint_path, ": written by a different config (only run.epochs, run.budget_minutes and run.threads may "
           "change on resume); saved: ", state.config.dump());
    }
    step = last_good_checkpoint = state.step;
    // Evaluations the interrupted run made after its checkpoint are dropped: the resumed
    // run makes them again.
    std::ifstream in(out("metrics.jsonl"));
    for (std::string line; std::getline(in, line);) {
      const json m = json::parse(line, nullptr, false);
      if (m.is_discarded() || !m.contains("step") || m["step"].get<int64_t>() > step) continue;
      kept_metrics += line + "\n";
      last = m;
      if (selection_error(m) < best_validation) {
        best_validation = selection_error(m);
        best = m;
      }
    }
    observer.on_message(cat("resuming from ", checkpoint_path, " at step ", step));
  }
  write_file_atomically(out("metrics.jsonl"), kept_metrics);
  std::ofstream metrics(out("metrics.jsonl"), std::ios::app);
  if (!metrics) fail(out("metrics.jsonl"), ": cannot write");

  // After `done` steps.
  const auto evaluate = [&](int64_t done) {
    const double epoch = static_cast<double>(done) / static_cast<double>(config.steps_per_epoch);
    const double elapsed = seconds_since(start);
    json m = {{"step", done}, {"epoch", epoch}, {"learning_rate", learning_rate(epoch)},
              {"momentum", momentum(epoch)}, {"lambda_scale", lambda_scale(epoch)}};
    json losses = json::object();
    for (const auto& [name, sum] : loss_sums) losses[name] = sum / static_cast<double>(std::max<int64_t>(1, window_steps));
    m["losses"] = losses;
    m["objective"] = objective_sum / static_cast<double>(std::max<int64_t>(1, window_steps));
    m["train_error"] = error_of(eval_tape, io, train_eval);
    m["validation_error"] = validation.size > 0 ? json(error_of(eval_tape, io, validation)) : json(nullptr);
    m["test_error"] = error_of(eval_tape, io, data.test);
    m["examples_per_second"] = static_cast<double>(window_steps * batch) / std::max(1e-9, elapsed - window_start);
    m["elapsed_seconds"] = elapsed;
    metrics << m.dump() << "\n" << std::flush;
    observer.on_eval(m);
    last = m;
    if (selection_error(m) < best_validation) {
      best_validation = selection_error(m);
      best = m;
      save_model(model, out("best.model.json"));
    }
    loss_sums.clear();
    objective_sum = 0;
    window_steps = 0;
    window_start = seconds_since(start);
  };
  // Never overwrites a good checkpoint with non-finite values.
  const auto checkpoint = [&](int64_t done) {
    if (!all_finite(params.values()) || !all_finite(sgd.state())) return false;
    save_checkpoint(checkpoint_path, {.step = done, .seed = config.seed, .config = config_json}, params, sgd);
    last_good_checkpoint = done;
    return true;
  };

  for (; step < total_steps; ++step) {
    const double epoch = static_cast<double>(step) / static_cast<double>(config.steps_per_epoch);
    if (config.budget_minutes > 0 && seconds_since(start) > 60.0 * config.budget_minutes) {
      observer.on_message(cat("wall-clock budget of ", config.budget_minutes, " minutes reached at step ", step,
                              " (epoch ", epoch, ")"));
      break;
    }
    labeled_rows.take(step * config.batch_labeled, config.batch_labeled, rows);
    gather_rows(train_set, rows, 0, step_tape.input(io.x), step_tape.input(io.y));
    if (semi_supervised) {
      unlabeled_rows.take(step * config.batch_unlabeled, config.batch_unlabeled, rows);
      gather_rows(train_set, rows, config.batch_labeled, step_tape.input(io.x), {});
    }
    set_lambdas(lambda_scale(epoch));
    step_tape.set_noise_key({config.seed, static_cast<uint64_t>(step)});
    step_tape.forward();
    const double objective = step_tape.objective();
    if (!std::isfinite(objective)) {
      diverged = cat("training diverged at step ", step, " (epoch ", epoch, "): the objective is ", objective);
      for (const std::string& name : loss_nodes) diverged += cat("; ", name, " = ", step_tape.value(name)[0]);
      break;
    }
    params.zero_grad();
    step_tape.backward();
    sgd.step(learning_rate(epoch), momentum(epoch));
    objective_sum += objective;
    for (const std::string& name : loss_nodes) loss_sums[name] += step_tape.value(name)[0];
    ++window_steps;
    observer.on_step(step + 1, total_steps, epoch, objective, seconds_since(start));
    const int64_t done = step + 1;
    if (done % eval_every == 0 || done == total_steps) evaluate(done);
    if (done % checkpoint_every == 0) {
      if (!checkpoint(done)) {
        diverged = cat("training diverged by step ", done, ": a parameter or momentum value is not finite");
        break;
      }
    }
  }

  TrainSummary summary;
  summary.diverged = !diverged.empty();
  const double epochs_done = static_cast<double>(step) / static_cast<double>(config.steps_per_epoch);
  if (summary.diverged) {
    observer.on_message(diverged + (last_good_checkpoint >= 0
                                         ? cat("; the last good checkpoint is ", checkpoint_path, " (step ", last_good_checkpoint, ")")
                                         : std::string("; no checkpoint was written before it")));
  } else {
    if (window_steps > 0 || last.is_null()) evaluate(step);
    checkpoint(step);
    save_model(model, out("model.json"));
  }
  json& s = summary.json;
  s = {{"status", summary.diverged ? "diverged" : "finished"},
       {"steps", step},
       {"epochs", epochs_done},
       {"wall_seconds", seconds_since(start)},
       {"config_hash", hash},
       {"config", config_json},
       {"labeled", split.labeled.size()},
       {"unlabeled", split.unlabeled.size()},
       {"validation", split.validation.size()},
       {"parameters", params.numel()}};
  if (summary.diverged) s["message"] = diverged;
  if (!last.is_null()) {
    s["final"] = {{"epoch", last["epoch"]}, {"test_error", last["test_error"]}, {"validation_error", last["validation_error"]}};
  }
  if (!best.is_null()) {
    s["best_validation"] = {{"epoch", best["epoch"]}, {"test_error", best["test_error"]}, {"validation_error", best["validation_error"]}};
    s["test_error"] = best["test_error"];
  }
  write_file_atomically(out("summary.json"), s.dump(2) + "\n");
  for (const std::string& problem : write_reports(out_dir, model)) observer.on_message(problem);
  return summary;
}

}  // namespace pens
