// The Python package's C++ half, pens._pens: models (load, save, JSON text, inspect,
// parameters as numpy arrays), compiled graphs run forward and backward on numpy arrays,
// gradient checks and training runs. The Python half (python/pens/__init__.py) adds the
// model builder and the Pythonic entry points. Long C++ work runs with the GIL released.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <variant>

#include "pens/autodiff/gradcheck.h"
#include "pens/autodiff/tape.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/dataset.h"
#include "pens/models/mnist.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/serialization/model_file.h"
#include "pens/train/config/config_file.h"
#include "pens/train/config/config_reader.h"
#include "pens/train/config/train_config.h"
#include "pens/train/loop/run.h"
#include "pens/train/optim/constraints.h"
#include "pens/train/optim/groups.h"
#include "pens/train/optim/optimizer.h"
#include "pens/train/tasks/batch_plan.h"
#include "pens/train/tasks/evaluation.h"
#include "pens/train/tasks/inspect.h"
#include "pens/train/tasks/trainer.h"
#include "pens/train/tasks/tree_model.h"

namespace py = pybind11;
using namespace py::literals;

namespace pens {
namespace {

using nlohmann::json;

// JSON text crosses to Python through its json module: one conversion, no type mapping of
// our own to keep in step with nlohmann's.
py::object to_python(const json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

ValueStorage storage_of(const std::string& s) {
  if (s == "auto") return ValueStorage::Auto;
  if (s == "inline") return ValueStorage::Inline;
  if (s == "sidecar") return ValueStorage::Sidecar;
  if (s == "none") return ValueStorage::None;
  fail("storage must be 'auto', 'inline', 'sidecar' or 'none', got '", s, "'");
}

std::vector<py::ssize_t> dims(const Shape& shape) {
  std::vector<py::ssize_t> out;
  for (int64_t d : shape.to_vector()) out.push_back(static_cast<py::ssize_t>(d));
  return out;
}

// A numpy array over memory `owner` keeps alive: no copy.
template <class T>
py::array_t<T> view(T* data, const Shape& shape, py::handle owner, bool writable) {
  py::array_t<T> a(dims(shape), data, owner);
  if (!writable) a.attr("setflags")("write"_a = false);
  return a;
}

BuildOptions build_options(int64_t batch, std::optional<int64_t> children, std::optional<int64_t> labeled,
                           bool parent, std::optional<std::string> tree) {
  BuildOptions o;
  o.batch = batch;
  o.children = children;
  o.labeled_rows = labeled;
  o.parent = parent;
  o.tree = std::move(tree);
  return o;
}

// A model's graph compiled in one precision, run on batches of any size: each row count
// gets a tape of its own, compiled when first fed and kept, and every tape reads and
// updates one copy of the parameters, so that a loop's last, partial batch needs nothing
// from the caller. Calls are serialized by a lock (a program shared by threads gives each
// call its own inputs' outputs); the lock is taken with the GIL released, and long work
// runs with it released.
class Compiled {
 public:
  // A graph for a row count, with its pseudo-ensemble's penalties (none outside training).
  struct Built {
    Graph graph;
    std::vector<PenaltyHandle> penalties;
  };
  using GraphOf = std::function<Built(int64_t rows)>;
  virtual ~Compiled() = default;
  // Feeds the inputs, runs forward, returns copies of the outputs.
  virtual py::dict forward(const py::dict& feed) = 0;
  // This call's parameter gradients (copies; None unless `copies`), or the sum with the
  // earlier calls' since zero_grad() when `accumulate`.
  virtual py::object backward(bool accumulate, bool copies) = 0;
  virtual void zero_grad() = 0;
  virtual double objective() = 0;
  virtual py::array value(const std::string& name, py::handle owner) = 0;
  virtual py::array grad(const std::string& name, py::handle owner) = 0;
  virtual py::dict parameters(py::handle owner, bool grads) = 0;
  virtual void set_noise_key(uint64_t seed, uint64_t step) = 0;
  // The scale of the penalties' λ that the λ stages schedule (pens train's lambda_scale).
  virtual void set_lambda_scale(double scale) = 0;
  // The model `model` with this program's parameter values (by name).
  virtual void copy_to(Model& model) = 0;
  // One optimizer update, the max-norm constraints and the moving averages after it.
  virtual void update(Optimizer& optimizer, const OptimizerStep& step,
                      std::span<const std::unique_ptr<Constraint>> constraints) = 0;
  // What an optimizer of this program updates (float32 programs only).
  virtual ParamStore<float>& float_params() = 0;
  virtual std::string dtype() const = 0;
  virtual const Graph& graph() const = 0;
  int64_t batch = 0;  // the row count compiled first
  std::vector<std::string> inputs, outputs;
  int64_t root_row = -1;  // a tree program's: the root's row of its scores

 protected:
  // The lock, taken without the GIL (whose holder may be waiting for this lock).
  std::unique_lock<std::mutex> lock() {
    py::gil_scoped_release unlocked;
    return std::unique_lock<std::mutex>(mutex_);
  }

 private:
  std::mutex mutex_;
};

// A fed value as a NumPy array (the Python half converts; this refuses what it did not).
py::array array_of(py::handle name, py::handle value) {
  if (!py::isinstance<py::array>(value)) {
    fail("input '", py::str(name).cast<std::string>(), "' takes a NumPy array, got ",
         py::str(py::type::of(value).attr("__name__")).cast<std::string>());
  }
  return py::reinterpret_borrow<py::array>(value);
}

// A path argument: a str or anything os.fspath takes (a pathlib.Path); else an Error
// naming `what`, not pybind11's list of signatures.
std::string path_of(py::handle value, const char* what) {
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  if (py::hasattr(value, "__fspath__")) return py::module_::import("os").attr("fspath")(value).cast<std::string>();
  fail(what, " must be a path (a str or a pathlib.Path), got ",
       py::str(py::type::of(value).attr("__name__")).cast<std::string>());
}

template <class T>
class CompiledAs final : public Compiled {
 public:
  // `fed`: fills every input of the graph (a tree's words, labels and gathers) once; the
  // program then takes no inputs.
  CompiledAs(const Model& model, GraphOf graph_of, int64_t rows, uint64_t init_seed,
             std::function<void(Tape<T>&)> fed = {}, Precision precision = Precision::Float32)
      : graph_of_(std::move(graph_of)), precision_(precision) {
    Program& first = program(rows);
    params_ = std::make_unique<ParamStore<T>>(first.graph);
    penalties_ = first.penalties;
    if (model.values) {
      for (const ParamEntry& e : params_->entries()) {
        const ParamEntry* from = model.values->find(e.name);
        if (!from) fail("the model holds no value for parameter '", e.name, "'");
        const std::span<const float> src = model.values->values().subspan(from->offset, from->shape.numel());
        TensorView<T> dst = params_->value(e);
        for (int64_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<T>(src[static_cast<size_t>(i)]);
      }
    } else {
      params_->initialize(first.graph, init_seed);
    }
    first.tape = std::make_unique<Tape<T>>(first.graph, *params_, CompileOptions{.batch = rows, .precision = precision_});
    batch = rows;
    if (fed) fed(*first.tape);
    for (NodeId v : first.graph.nodes()) {
      const Node& n = first.graph[v];
      if (is_input(n) && !fed) {
        inputs.push_back(n.name);
        // The row count is read from inputs with a row per example (not the labels of a
        // semi-supervised batch's labeled rows).
        const std::vector<int64_t>& shape = n.attrs.get_ints("shape");
        if (!shape.empty() && shape[0] == kBatch && first.tape->input(n.name).shape[0] == rows) {
          batch_inputs_.insert(n.name);
        }
      }
      if (n.has(kOutput)) outputs.push_back(n.name);
    }
  }

  py::dict forward(const py::dict& feed) override {
    const auto locked = lock();
    Tape<T>& tape = tape_for(rows_of(feed));
    for (const auto& [name, array] : feed) put(tape, py::cast<std::string>(name), array_of(name, array));
    tape.set_noise_key(key_);
    for (const PenaltyHandle& p : penalties_) {
      tape.set_constant(p.lambda, static_cast<T>(penalty_weight(p, lambda_scale_)));
    }
    {
      py::gil_scoped_release unlocked;
      tape.forward();
    }
    last_ = &tape;
    py::dict out;
    for (const std::string& name : outputs) {
      const TensorView<const T> v = tape.value(name);
      py::array_t<T> copy(dims(v.shape));
      std::memcpy(copy.mutable_data(), v.data, sizeof(T) * static_cast<size_t>(v.size()));
      out[py::str(name)] = std::move(copy);
    }
    return out;
  }
  py::object backward(bool accumulate, bool copies) override {
    const auto locked = lock();
    Tape<T>& tape = ran("backward()");
    if (tape.loss_count() == 0) {
      fail("the graph has no loss to differentiate: compile with graph='training' (the pseudo-ensemble's objective), "
           "for a model with a loss node (marked loss=True)");
    }
    {
      py::gil_scoped_release unlocked;
      if (!accumulate) params_->zero_grad();
      tape.backward();
    }
    if (!copies) return py::none();
    py::dict out;
    for (const ParamEntry& e : params_->entries()) {
      const TensorView<T> g = params_->grad(e);
      py::array_t<T> copy(dims(e.shape));
      std::memcpy(copy.mutable_data(), g.data, sizeof(T) * static_cast<size_t>(g.size()));
      out[py::str(e.name)] = std::move(copy);
    }
    return out;
  }
  void zero_grad() override {
    const auto locked = lock();
    params_->zero_grad();
  }
  double objective() override {
    const auto locked = lock();
    return static_cast<double>(ran("objective").objective());
  }
  py::array value(const std::string& name, py::handle owner) override {
    const auto locked = lock();
    const TensorView<const T> v = ran("value()").value(name);
    return view(const_cast<T*>(v.data), v.shape, owner, false);
  }
  py::array grad(const std::string& name, py::handle owner) override {
    const auto locked = lock();
    if (params_->find(name)) return view(params_->grad(name).data, params_->at(name).shape, owner, false);
    const TensorView<const T> g = ran("grad()").grad(name);
    return view(const_cast<T*>(g.data), g.shape, owner, false);
  }
  py::dict parameters(py::handle owner, bool grads) override {
    py::dict out;
    for (const ParamEntry& e : params_->entries()) {
      out[py::str(e.name)] = grads ? view(params_->grad(e).data, e.shape, owner, false)
                                   : view(params_->value(e).data, e.shape, owner, true);
    }
    return out;
  }
  void set_noise_key(uint64_t seed, uint64_t step) override {
    const auto locked = lock();
    key_ = {seed, step};
  }
  void set_lambda_scale(double scale) override {
    if (!std::isfinite(scale) || scale < 0) fail("the λ scale must be a finite number, at least 0, got ", scale);
    const auto locked = lock();
    lambda_scale_ = scale;
  }
  void copy_to(Model& model) override {
    const auto locked = lock();
    auto values = std::make_shared<ParamStore<float>>(model.graph);
    for (const ParamEntry& e : values->entries()) {
      const ParamEntry* from = params_->find(e.name);
      if (!from) fail("the program holds no parameter '", e.name, "' of the model: is it the model it was compiled from?");
      if (from->shape != e.shape) {
        fail("parameter '", e.name, "' is ", from->shape.str(), " in the program and ", e.shape.str(), " in the model");
      }
      const TensorView<T> src = params_->value(*from);
      TensorView<float> dst = values->value(e);
      for (int64_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<float>(src[i]);
    }
    model.values = std::move(values);  // views of the old values keep them alive
  }
  void update(Optimizer& optimizer, const OptimizerStep& step,
              std::span<const std::unique_ptr<Constraint>> constraints) override {
    const auto locked = lock();
    py::gil_scoped_release unlocked;
    update_and_constrain(optimizer, step, constraints, {});
    // The moving averages (running statistics, a mean teacher) follow the graph last run.
    if (last_) last_->update_averages();
  }
  ParamStore<float>& float_params() override {
    if constexpr (std::is_same_v<T, float>) {
      return *params_;
    } else {
      fail("optimizers update float32 programs; this one is float64 (compile with dtype='float32' to train)");
    }
  }
  std::string dtype() const override { return std::is_same_v<T, float> ? "float32" : "float64"; }
  const Graph& graph() const override { return programs_.at(batch).graph; }

 private:
  struct Program {
    Graph graph;
    std::vector<PenaltyHandle> penalties;
    std::unique_ptr<Tape<T>> tape;
  };

  Program& program(int64_t rows) {
    auto [at, fresh] = programs_.try_emplace(rows);
    if (fresh) {
      try {
        Built built = graph_of_(rows);
        at->second.graph = std::move(built.graph);
        at->second.penalties = std::move(built.penalties);
      } catch (...) {
        programs_.erase(at);
        throw;
      }
    }
    return at->second;
  }

  // The rows of this feed: the first dimension of its inputs with a row per example,
  // which must agree.
  int64_t rows_of(const py::dict& feed) const {
    int64_t rows = 0;
    std::string first;
    for (const auto& [key, value] : feed) {
      const std::string name = py::cast<std::string>(key);
      if (!batch_inputs_.contains(name)) continue;
      const py::array array = array_of(key, value);
      if (array.ndim() == 0) fail("input '", name, "' takes an array with a row per example, got a scalar");
      const int64_t n = static_cast<int64_t>(array.shape(0));
      if (n < 1) fail("input '", name, "' has no rows");
      if (rows > 0 && n != rows) fail("inputs '", first, "' and '", name, "' have ", rows, " and ", n, " rows");
      if (rows == 0) rows = n, first = name;
    }
    return rows > 0 ? rows : batch;
  }

  Tape<T>& tape_for(int64_t rows) {
    Program& p = program(rows);
    if (!p.tape) {
      p.tape = std::make_unique<Tape<T>>(p.graph, *params_, CompileOptions{.batch = rows, .precision = precision_});
    }
    return *p.tape;
  }

  Tape<T>& ran(const char* what) {
    if (!last_) fail(what, " needs a forward() first");
    return *last_;
  }

  static void put(Tape<T>& tape, const std::string& name, const py::array& a) {
    TensorView<T> dst = tape.input(name);
    const std::vector<py::ssize_t> want = dims(dst.shape);
    const std::vector<py::ssize_t> got(a.shape(), a.shape() + a.ndim());
    if (got != want) {
      fail("input '", name, "' takes an array of shape ", py::str(py::tuple(py::cast(want))).cast<std::string>(),
           ", got ", py::str(py::tuple(py::cast(got))).cast<std::string>());
    }
    if (tape.info(name).dtype == DType::Index) {
      if (a.dtype().kind() != 'i' && a.dtype().kind() != 'u') {
        fail("input '", name, "' holds class indices: give an integer array, got dtype ",
             py::str(a.dtype()).cast<std::string>());
      }
      const auto labels = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
      for (int64_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<T>(labels.data()[i]);
      return;
    }
    if (a.dtype().kind() != 'f') {
      fail("input '", name, "' takes floating-point values, got dtype ", py::str(a.dtype()).cast<std::string>());
    }
    // One copy into the tape's arena, with the dtype converted when it differs.
    const auto values = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(a);
    std::memcpy(dst.data, values.data(), sizeof(T) * static_cast<size_t>(dst.size()));
  }

  GraphOf graph_of_;
  Precision precision_;  // of the products of a float32 program's tapes
  std::map<int64_t, Program> programs_;  // by row count; map nodes stay where they are
  std::set<std::string> batch_inputs_;   // inputs with a row per example
  std::unique_ptr<ParamStore<T>> params_;
  Tape<T>* last_ = nullptr;  // the tape of the last forward()
  NoiseKey key_{};
  std::vector<PenaltyHandle> penalties_;  // the same λ constants in every row count's graph
  double lambda_scale_ = 1;
};

// A tree model compiled for one tree: its unrolled graph ("inference" or "parent", noise
// off: what predictions read) or its training graph (the pseudo-ensemble, the loss over
// the labeled nodes), fed the tree's words (ids from `vocabulary`), labels and level
// gathers once.
std::unique_ptr<Compiled> compile_tree(const Model& model, const std::string& text, const Vocabulary* vocabulary,
                                       const std::string& dtype, const std::string& graph, uint64_t init_seed) {
  if (!model.tree) fail("the model is not a network over trees (it has no tree section): compile it with batch=");
  if (!vocabulary) fail("a tree's words need the vocabulary they were numbered by: vocabulary=pens.vocabulary(dir)");
  if (dtype != "float32") fail("tree programs compute in float32 (pens.gradcheck(model, tree=...) checks in float64)");
  // A tree's unrolled parent computes with its noise off: "inference" and "parent" are one.
  if (graph != "inference" && graph != "parent" && graph != "training") {
    fail("graph must be 'inference' (or 'parent') or 'training' for a tree, got '", graph, "'");
  }
  std::vector<SentimentTree> trees = parse_trees(text, "tree");
  if (trees.size() != 1) fail("tree: give one tree, got ", trees.size());
  vocabulary->assign_ids(trees);
  // The closures outlive this call: the model and its TreeModel (which refers to it) go
  // with them.
  const auto kept = std::make_shared<const Model>(model);
  const auto tree_model = std::make_shared<const TreeModel>(*kept, task_of(*kept));
  const auto unrolled = std::make_shared<UnrolledTree>(graph == "training" ? tree_model->training_tree(trees[0])
                                                                           : tree_model->unroll(trees[0]));
  auto program = std::make_unique<CompiledAs<float>>(
      *kept, [unrolled](int64_t) { return Compiled::Built{unrolled->graph, unrolled->penalties}; }, 1, init_seed,
      [kept, tree_model, unrolled, tree = trees[0]](Tape<float>& tape) { tree_model->feed(tape, *unrolled, tree); });
  program->outputs = {unrolled->scores};
  program->root_row = unrolled->row_of[static_cast<size_t>(trees[0].root())];
  return program;
}

// A Python dict of an optimizer kind's settings (numbers and strings) as Attributes;
// `where` names the dict in errors.
Attributes optimizer_settings(const py::dict& settings, const std::string& where) {
  Attributes attrs;
  for (const auto& [key, value] : settings) {
    const std::string name = py::cast<std::string>(key);
    if (py::isinstance<py::bool_>(value)) fail(where, "setting '", name, "' takes a number, got a bool");
    if (py::isinstance<py::int_>(value)) {
      attrs.set(name, value.cast<int64_t>());
    } else if (py::isinstance<py::float_>(value)) {
      attrs.set(name, value.cast<double>());
    } else if (py::isinstance<py::str>(value)) {
      attrs.set(name, value.cast<std::string>());
    } else {
      fail(where, "setting '", name, "' takes a number or a string, got ",
           py::str(py::type::of(value).attr("__name__")).cast<std::string>());
    }
  }
  return attrs;
}

// pens.optim's groups: dicts {"params": [names], "kind": K, "lr": rate, "momentum": m,
// ...K's settings} as train/optim/groups.h's OptimizerGroup.
std::vector<OptimizerGroup> optimizer_groups(const py::list& groups) {
  std::vector<OptimizerGroup> out;
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string where = cat("groups[", i, "]");
    if (!py::isinstance<py::dict>(groups[i])) {
      fail(where, " must be a dict {'params': [...], 'kind': ..., 'lr': ...}, got ",
           py::str(py::type::of(groups[i]).attr("__name__")).cast<std::string>());
    }
    py::dict rest = py::dict(groups[i]);  // a copy: what is left after the named keys is the kind's settings
    const auto take = [&](const char* key, bool required) -> py::object {
      if (!rest.contains(key)) {
        if (required) fail(where, " has no '", key, "'");
        return py::none();
      }
      py::object value = rest[key];
      PyDict_DelItemString(rest.ptr(), key);
      return value;
    };
    OptimizerGroup& group = out.emplace_back();
    const py::object params = take("params", true);
    if (py::isinstance<py::str>(params) || !py::isinstance<py::sequence>(params) || py::len(params) == 0) {
      fail(where, "['params'] must be a non-empty list of parameter names");
    }
    for (const py::handle name : params) {
      if (!py::isinstance<py::str>(name)) fail(where, "['params'] must be a non-empty list of parameter names");
      group.params.push_back(name.cast<std::string>());
    }
    const py::object kind = take("kind", true);
    if (!py::isinstance<py::str>(kind)) fail(where, "['kind'] must be an optimizer's name");
    group.kind = kind.cast<std::string>();
    const auto number = [&](const char* key, bool required) -> std::optional<double> {
      const py::object value = take(key, required);
      if (value.is_none()) return std::nullopt;
      if (py::isinstance<py::bool_>(value) || !(py::isinstance<py::int_>(value) || py::isinstance<py::float_>(value))) {
        fail(where, "['", key, "'] must be a number");
      }
      return value.cast<double>();
    };
    group.learning_rate = *number("lr", true);
    group.momentum = number("momentum", false).value_or(group.momentum);
    group.settings = optimizer_settings(rest, where + " ");
  }
  return out;
}

// An optimizer of a registered kind over a float32 program's parameters, with the
// model's max-norm constraints after each update; `groups` put parameters on optimizers
// of their own, their rates relative to `learning_rate` as given here.
class PythonOptimizer {
 public:
  PythonOptimizer(Compiled& program, const std::string& kind, double learning_rate, double momentum,
                  const std::string& max_norm_rule, const py::dict& settings, const py::list& groups)
      : learning_rate(learning_rate), momentum(momentum), program_(program) {
    optimizer_ = make_optimizer_with_groups(kind, optimizer_settings(settings, "optimizer "), learning_rate,
                                            optimizer_groups(groups), program.float_params());
    constraints_ = model_constraints(program.graph(), program.float_params(), parse_max_norm_rule(max_norm_rule));
  }
  void step() {
    if (!(learning_rate >= 0) || !std::isfinite(learning_rate)) {
      fail("the learning rate must be a finite number, at least 0, got ", learning_rate);
    }
    program_.update(*optimizer_, {.step = steps, .learning_rate = learning_rate, .momentum = momentum}, constraints_);
    ++steps;
  }
  void restart() {
    optimizer_->restart();
    steps = 0;
  }
  std::string kind() const { return std::string(optimizer_->kind()); }

  double learning_rate, momentum;
  int64_t steps = 0;

 private:
  Compiled& program_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<std::unique_ptr<Constraint>> constraints_;
};

// A data set from NumPy arrays: x [examples, values] (any real dtype, as float32) and y
// [examples] (class indices 0, 1, ...), then the rows of `unlabeled` [examples, values]
// (None: none) without a label. `what` names it in errors.
Dataset dataset_of(py::handle x_object, py::handle y_object, const std::string& what,
                   py::handle unlabeled_object = py::none()) {
  const py::array x_any = array_of(py::str(what + "[0]"), x_object);
  const py::array y_any = array_of(py::str(what + "[1]"), y_object);
  if (x_any.ndim() != 2) {
    fail(what, ": the examples must be a 2-D array (examples, values), got ", x_any.ndim(), " dimensions");
  }
  if (y_any.ndim() != 1) fail(what, ": the labels must be a 1-D array, got ", y_any.ndim(), " dimensions");
  if (x_any.dtype().kind() != 'f' && x_any.dtype().kind() != 'i' && x_any.dtype().kind() != 'u') {
    fail(what, ": the examples must be numbers, got dtype ", py::str(x_any.dtype()).cast<std::string>());
  }
  if (y_any.dtype().kind() != 'i' && y_any.dtype().kind() != 'u') {
    fail(what, ": the labels must be class indices (integers), got dtype ", py::str(y_any.dtype()).cast<std::string>());
  }
  const auto size = static_cast<int64_t>(x_any.shape(0)), dim = static_cast<int64_t>(x_any.shape(1));
  if (static_cast<int64_t>(y_any.shape(0)) != size) {
    fail(what, ": ", size, " examples but ", y_any.shape(0), " labels");
  }
  if (size == 0) fail(what, ": no examples");
  using Floats = py::array_t<float, py::array::c_style | py::array::forcecast>;
  const auto x = Floats::ensure(x_any);
  const auto y = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(y_any);
  Floats unlabeled;
  if (!unlabeled_object.is_none()) {
    unlabeled = Floats::ensure(array_of(py::str(what + "[2]"), unlabeled_object));
    if (unlabeled.ndim() != 2 || unlabeled.shape(1) != dim) {
      fail(what, ": the unlabeled examples must be a 2-D array of ", dim, " values per example, as the labeled ones");
    }
  }
  const int64_t extra = unlabeled ? static_cast<int64_t>(unlabeled.shape(0)) : 0;
  int64_t classes = 0;
  for (int64_t i = 0; i < size; ++i) {
    const int64_t label = y.data()[i];
    if (label < 0) fail(what, ": label ", label, " of example ", i, " is not a class index (0, 1, ...)");
    classes = std::max(classes, label + 1);
  }
  Dataset d = make_dataset(size + extra, dim, classes, what);
  std::memcpy(d.x.data(), x.data(), sizeof(float) * static_cast<size_t>(size * dim));
  if (extra > 0) {
    std::memcpy(d.x.data() + size * dim, unlabeled.data(), sizeof(float) * static_cast<size_t>(extra * dim));
  }
  for (int64_t i = 0; i < (size + extra) * dim; ++i) {
    if (!std::isfinite(d.x[static_cast<size_t>(i)])) {
      fail(what, ": ", i / dim < size ? "example " : "unlabeled example ", i / dim < size ? i / dim : i / dim - size,
           " holds a value that is not finite");
    }
  }
  for (int64_t i = 0; i < size + extra; ++i) d.y[static_cast<size_t>(i)] = i < size ? static_cast<float>(y.data()[i]) : -1;
  return d;
}

// A data set as NumPy arrays (X [examples, values] float32, y [examples] int64): what
// dataset_of reads back.
py::tuple arrays_of(const Dataset& d) {
  py::array_t<float> x({static_cast<py::ssize_t>(d.size), static_cast<py::ssize_t>(d.dim)});
  std::memcpy(x.mutable_data(), d.x.data(), sizeof(float) * d.x.size());
  py::array_t<int64_t> y(static_cast<py::ssize_t>(d.size));
  for (int64_t i = 0; i < d.size; ++i) y.mutable_data()[i] = static_cast<int64_t>(d.y[static_cast<size_t>(i)]);
  return py::make_tuple(x, y);
}

// (X, y, X_unlabeled or None, X_test, y_test) from Python, or none.
std::optional<GivenData> given_data(py::handle data) {
  if (data.is_none()) return std::nullopt;
  const auto arrays = data.cast<py::tuple>();
  TrainData d{dataset_of(arrays[0], arrays[1], "data", arrays[2]), dataset_of(arrays[3], arrays[4], "test")};
  d.train.classes = d.test.classes = std::max(d.train.classes, d.test.classes);
  return GivenData{std::move(d), "<arrays from Python>"};
}

// pens train's plan for a dense config, for a loop written in Python: its model as the
// run starts it, the batches each step reads, the schedule at each step and the data.
class PythonPlan {
 public:
  PythonPlan(const std::string& config, const RunOptions& options, std::optional<GivenData> data)
      : run_(prepare_run(config, options, std::move(data))),
        dense_(dynamic_cast<const PreparedClassifier*>(run_.task.get())) {
    if (!dense_) fail(config, ": a ", run_.kind, " config; a training plan is for classifier configs on dense data");
    const TrainConfig& c = dense_->config;
    model_ = std::make_shared<Model>(load_configured_model(c.source, c.model, c.model_patch));
    io_ = classifier_io(model_->graph, c.model);
    start_values(*model_, c.init_seed, c.init_from);
    schedule_ = run_schedule(c, *model_);
    if (c.batch_shards > 1 || !c.trainable_periods.empty()) {
      fail(config, ": a training plan follows one unit per step, every parameter trained: "
           "batch.shards and trainable periods are pens train's alone");
    }
    plan_ = std::make_unique<BatchPlan>(c, dense_->data.train);
  }

  std::shared_ptr<Model> model() const { return model_; }
  const TrainConfig& config() const { return dense_->config; }
  const ClassifierIo& io() const { return io_; }
  int64_t total_steps() const { return config().epochs * config().steps_per_epoch; }

  // The feed of step `step`: the labeled rows, then the unlabeled ones.
  py::dict batch(int64_t step) {
    const TrainConfig& c = config();
    if (step < 0) fail("step must be at least 0, got ", step);
    const Dataset& train = dense_->data.train;
    const int64_t rows = c.batch_labeled + c.batch_unlabeled;
    py::array_t<float> x({static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(train.dim)});
    const TensorView<float> into{x.mutable_data(), Shape{rows, train.dim}};
    py::array_t<int64_t> y(static_cast<py::ssize_t>(c.batch_labeled));
    plan_->labeled(step * c.batch_labeled, c.batch_labeled, rows_);
    gather_rows(train, rows_, 0, into, {});
    for (size_t i = 0; i < rows_.size(); ++i) {
      y.mutable_data()[i] = static_cast<int64_t>(train.y[static_cast<size_t>(rows_[i])]);
    }
    if (c.batch_unlabeled > 0) {
      plan_->unlabeled(step * c.batch_unlabeled, c.batch_unlabeled, rows_);
      gather_rows(train, rows_, c.batch_labeled, into, {});
    }
    py::dict out;
    out[py::str(io_.x)] = x;
    out[py::str(io_.y)] = y;
    return out;
  }

  py::dict at(int64_t step) const {
    const PlannedStep p = planned_step(schedule_, step, config().steps_per_epoch);
    return py::dict("epoch"_a = p.epoch, "learning_rate"_a = p.update.learning_rate, "momentum"_a = p.update.momentum,
                    "lambda_scale"_a = p.lambda_scale, "restart"_a = p.restart, "optimizer_step"_a = p.update.step);
  }

  // A part of the data as (X, y): the split's "labeled" or "validation" examples, or "test".
  py::tuple data(const std::string& part) const {
    const TrainData& d = dense_->data;
    if (part == "test") return arrays_of(d.test);
    if (part == "validation") return arrays_of(subset(d.train, plan_->split().validation));
    if (part == "labeled") return arrays_of(subset(d.train, plan_->split().labeled));
    fail("part must be 'labeled', 'validation' or 'test', got '", part, "'");
  }

 private:
  PreparedRun run_;
  const PreparedClassifier* dense_;  // run_'s task
  std::shared_ptr<Model> model_;
  ClassifierIo io_;
  Schedule schedule_;
  std::unique_ptr<BatchPlan> plan_;
  std::vector<int64_t> rows_;
};

// Reports a training run to a Python callable: callback(event, data), with the GIL held
// only while it runs. An exception it raises stops the run (the last checkpoint stays).
class PythonObserver final : public TrainObserver {
 public:
  explicit PythonObserver(py::object callback) : callback_(std::move(callback)) {}
  void on_step(int64_t step, int64_t total, double epoch, double objective, double elapsed) override {
    call("step", {{"step", step}, {"total_steps", total}, {"epoch", epoch}, {"objective", objective},
                  {"elapsed_seconds", elapsed}});
  }
  void on_eval(const json& metrics) override { call("eval", metrics); }
  void on_message(const std::string& text) override { call("message", text); }

 private:
  void call(const char* event, const json& data) {
    if (callback_.is_none()) return;
    py::gil_scoped_acquire locked;
    callback_(event, to_python(data));
  }
  py::object callback_;
};

}  // namespace
}  // namespace pens

PYBIND11_MODULE(_pens, m) {
  using namespace pens;
  m.doc() = "pens: pseudo-ensembles (the C++ core; import pens, not pens._pens)";
  static py::exception<Error> error(m, "Error", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });

  py::class_<Model, std::shared_ptr<Model>>(m, "Model")
      .def_static("load", [](py::handle path) { return load_model(path_of(path, "the model file")); }, "path"_a,
                  "Reads a model file (and its sidecar).")
      .def_static("from_json", [](const std::string& text, py::handle dir) {
                    return parse_model(text, "<json>", path_of(dir, "dir"));
                  },
                  "text"_a, "dir"_a = ".", "Parses model JSON text; a sidecar is looked for in `dir`.")
      .def("to_json", [](const Model& model) { return write_model(model, ValueStorage::Inline, "").json; },
           "The canonical JSON text, values inline.")
      .def("save", [](const Model& model, py::handle path, const std::string& storage) {
             save_model(model, path_of(path, "the model file"), storage_of(storage));
           }, "path"_a, "storage"_a = "auto")
      .def_property_readonly("trained", [](const Model& model) { return model.values != nullptr; })
      .def_property_readonly("is_tree_model", [](const Model& model) { return model.tree.has_value(); })
      .def("initialize", [](Model& model, uint64_t seed) {
             model.values = std::make_shared<ParamStore<float>>(model.graph);
             model.values->initialize(model.graph, seed);
           }, "seed"_a = 1, "Gives the parameters values from their init attributes.")
      .def("parameters", [](Model& model) {
             if (!model.values) {
               model.values = std::make_shared<ParamStore<float>>(model.graph);
               model.values->initialize(model.graph, 1);
             }
             // Each view holds the store it reads: initialize() or Program.copy_to() give
             // the model a new one, and the views keep reading the old.
             const py::capsule store(new std::shared_ptr<ParamStore<float>>(model.values), [](void* p) {
               delete static_cast<std::shared_ptr<ParamStore<float>>*>(p);
             });
             py::dict out;
             for (const ParamEntry& e : model.values->entries()) {
               out[py::str(e.name)] = view(model.values->value(e).data, e.shape, store, true);
             }
             return out;
           }, "The parameter values: float32 arrays over the model's values (writes change the model); a model "
              "without values gets them from its init attributes with seed 1, as initialize() gives them.")
      .def("inspect", [](const Model& model, const std::string& format, int64_t batch, std::optional<int64_t> children,
                         std::optional<int64_t> labeled, bool parent, std::optional<std::string> tree) -> py::object {
             const BuiltGraph built = build_graph(model, build_options(batch, children, labeled, parent, tree));
             if (format == "json") return to_python(inspect_json(built));
             if (format == "dot") return py::str(inspect_dot(built));
             if (format == "text") return py::str(inspect_text(built));
             fail("format must be 'text', 'dot' or 'json', got '", format, "'");
           }, "format"_a = "text", "batch"_a = 8, "children"_a = py::none(), "labeled"_a = py::none(),
           "parent"_a = false, "tree"_a = py::none());

  py::class_<Compiled>(m, "Compiled")
      .def_readonly("inputs", &Compiled::inputs)
      .def_readonly("outputs", &Compiled::outputs)
      .def_property_readonly("dtype", &Compiled::dtype)
      .def_readonly("batch", &Compiled::batch)
      .def_readonly("root_row", &Compiled::root_row)
      .def("forward", &Compiled::forward, "feed"_a)
      .def("backward", &Compiled::backward, "accumulate"_a, "copies"_a)
      .def("zero_grad", &Compiled::zero_grad)
      .def_property_readonly("objective", &Compiled::objective)
      .def("set_noise_key", &Compiled::set_noise_key, "seed"_a, "step"_a = 0)
      .def("set_lambda_scale", &Compiled::set_lambda_scale, "scale"_a)
      .def("copy_to", &Compiled::copy_to, "model"_a)
      .def("value", [](py::object self, const std::string& name) { return self.cast<Compiled&>().value(name, self); })
      .def("grad", [](py::object self, const std::string& name) { return self.cast<Compiled&>().grad(name, self); })
      .def("parameters", [](py::object self) { return self.cast<Compiled&>().parameters(self, false); })
      .def("grads", [](py::object self) { return self.cast<Compiled&>().parameters(self, true); });

  py::class_<PythonOptimizer>(m, "Optimizer")
      .def(py::init<Compiled&, const std::string&, double, double, const std::string&, const py::dict&,
                    const py::list&>(),
           "program"_a, "kind"_a, "learning_rate"_a, "momentum"_a, "max_norm_rule"_a, "settings"_a,
           "groups"_a = py::list(), py::keep_alive<1, 2>())
      .def("step", &PythonOptimizer::step)
      .def("restart", &PythonOptimizer::restart)
      .def_property_readonly("kind", &PythonOptimizer::kind)
      .def_readwrite("learning_rate", &PythonOptimizer::learning_rate)
      .def_readwrite("momentum", &PythonOptimizer::momentum)
      .def_readonly("steps", &PythonOptimizer::steps);
  m.def("optimizer_kinds", [] {
    std::vector<std::string> names;
    for (const OptimizerKind* kind : OptimizerRegistry::global().all()) names.push_back(kind->name);
    return names;
  });

  m.def("compile", [](const Model& model, int64_t batch, const std::string& dtype, const std::string& graph,
                      int64_t samples, std::optional<int64_t> children, std::optional<int64_t> labeled,
                      uint64_t init_seed, std::optional<std::string> tree, const Vocabulary* vocabulary,
                      const std::string& precision_text) -> std::unique_ptr<Compiled> {
          const Precision precision = parse_precision(precision_text, "compile");
          if (precision != Precision::Float32 && (tree || dtype != "float32")) {
            fail("compile: precision '", precision_text,
                 "' is for float32 programs of batch models (dtype='float32', no tree)");
          }
          require_precision(precision, "compile");
          if (tree) return compile_tree(model, *tree, vocabulary, dtype, graph, init_seed);
          if (model.tree) {
            fail("a tree model compiles for one tree: give tree=\"(3 (2 a) (4 b))\" and the vocabulary its words "
                 "come from (pens.vocabulary)");
          }
          if (batch < 1) fail("batch must be at least 1, got ", batch);
          Compiled::GraphOf graph_of;
          if (graph == "inference") {
            if (samples < 0) fail("samples must be at least 0, got ", samples);
            graph_of = [inference = build_inference(model.graph, samples)](int64_t) {
              return Compiled::Built{inference, {}};
            };
          } else if (graph == "training") {
            // The training graph depends on the rows (the labeled ones among them).
            graph_of = [model, children, labeled](int64_t rows) {
              BuiltGraph built = build_graph(model, build_options(rows, children, labeled, false, std::nullopt));
              return Compiled::Built{std::move(built.graph),
                                     built.ensemble ? built.ensemble->penalties : std::vector<PenaltyHandle>{}};
            };
          } else if (graph == "parent") {
            graph_of = [parent = model.graph](int64_t) { return Compiled::Built{parent, {}}; };
          } else {
            fail("graph must be 'inference', 'training' or 'parent', got '", graph, "'");
          }
          if (dtype == "float32") {
            return std::make_unique<CompiledAs<float>>(model, std::move(graph_of), batch, init_seed, nullptr, precision);
          }
          if (dtype == "float64") return std::make_unique<CompiledAs<double>>(model, std::move(graph_of), batch, init_seed);
          fail("dtype must be 'float32' or 'float64', got '", dtype, "'");
        }, "model"_a, "batch"_a, "dtype"_a = "float32", "graph"_a = "inference", "samples"_a = 0,
        "children"_a = py::none(), "labeled"_a = py::none(), "init_seed"_a = 1, "tree"_a = py::none(),
        "vocabulary"_a = py::none(), "precision"_a = "float32");

  py::class_<Vocabulary>(m, "Vocabulary")
      .def("__len__", &Vocabulary::size)
      .def("id", &Vocabulary::id, "word"_a, "The word's id (0, <unk>, for a word it does not know).")
      .def("word", [](const Vocabulary& v, int32_t id) {
             if (id < 0 || id >= v.size()) fail("no word with id ", id, " (the vocabulary has ", v.size(), ")");
             return v.word(id);
           }, "id"_a);
  m.def("vocabulary", [](py::handle dir, int64_t min_count, bool lowercase) {
          if (min_count < 1) fail("min_count must be at least 1, got ", min_count);
          const std::string folder = path_of(dir, "dir");
          return Vocabulary::from_trees(read_trees(folder + "/train.txt"), {.min_count = min_count, .lowercase = lowercase});
        }, "dir"_a, "min_count"_a = 1, "lowercase"_a = false);

  m.def("gradcheck", [](const Model& model, int64_t batch, std::optional<int64_t> children,
                        std::optional<int64_t> labeled, bool parent, std::optional<int64_t> sample, double tolerance,
                        double step, uint64_t init_seed, std::optional<std::string> tree) {
          if (!(tolerance > 0)) fail("tolerance must be above 0, got ", tolerance);
          if (!(step > 0)) fail("step must be above 0, got ", step);
          const BuiltGraph built = build_graph(model, build_options(batch, children, labeled, parent, std::move(tree)));
          GradcheckOptions options;
          options.batch = built.batch;
          options.inputs = false;
          options.init_seed = init_seed;
          options.tolerance = tolerance;
          options.step = step;
          options.sample = sample.value_or(default_sample(built.graph, built.batch));
          if (options.sample < 0) fail("sample must be at least 0 (0: every element), got ", options.sample);
          const auto labels = label_values(built.graph, built.batch);
          GradcheckResult r;
          {
            py::gil_scoped_release unlocked;
            r = gradcheck(built.graph, labels, options);
          }
          return py::dict("passed"_a = r.passed, "max_error"_a = r.max_error, "worst"_a = r.worst,
                          "entries"_a = r.entries, "variables"_a = r.variables, "checked"_a = r.checked,
                          "truncated"_a = r.truncated);
        }, "model"_a, "batch"_a = 8, "children"_a = py::none(), "labeled"_a = py::none(), "parent"_a = false,
        "sample"_a = py::none(), "tolerance"_a = 1e-6, "step"_a = 1e-5, "init_seed"_a = 1, "tree"_a = py::none());

  m.def("train", [](const std::string& config, const RunOptions& options, py::object callback, py::object data) {
          const PreparedRun run = prepare_run(config, options, given_data(data));
          PythonObserver observer(std::move(callback));
          TrainSummary summary;
          {
            py::gil_scoped_release unlocked;
            summary = run_training(run, observer);
          }
          py::dict out = to_python(summary.json);
          out["out_dir"] = run.out_dir;
          out["diverged"] = summary.diverged;
          return out;
        }, "config"_a, "options"_a, "callback"_a = py::none(), "data"_a = py::none());

  py::class_<PythonPlan>(m, "TrainingPlan")
      .def(py::init([](const std::string& config, const RunOptions& options, py::object data) {
             return std::make_unique<PythonPlan>(config, options, given_data(data));
           }), "config"_a, "options"_a, "data"_a = py::none())
      .def_property_readonly("model", &PythonPlan::model)
      .def_property_readonly("total_steps", &PythonPlan::total_steps)
      .def_property_readonly("steps_per_epoch", [](const PythonPlan& p) { return p.config().steps_per_epoch; })
      .def_property_readonly("seed", [](const PythonPlan& p) { return p.config().seed; })
      .def_property_readonly("threads", [](const PythonPlan& p) { return p.config().threads; })
      .def_property_readonly("batch_labeled", [](const PythonPlan& p) { return p.config().batch_labeled; })
      .def_property_readonly("batch_unlabeled", [](const PythonPlan& p) { return p.config().batch_unlabeled; })
      .def_property_readonly("eval_batch", [](const PythonPlan& p) { return p.config().eval_batch; })
      .def_property_readonly("recalibrate_statistics",
                             [](const PythonPlan& p) { return p.config().recalibrate_statistics; })
      .def_property_readonly("optimizer", [](const PythonPlan& p) { return p.config().optimizer; })
      .def_property_readonly("optimizer_settings", [](const PythonPlan& p) {
             return to_python(attributes_json(p.config().optimizer_settings));
           })
      .def_property_readonly("optimizer_groups", [](const PythonPlan& p) {
             // The config's spelling, with pens.optim's "lr" for "learning_rate".
             json groups = optimizer_groups_json(p.config().optimizer_groups);
             for (json& g : groups) {
               g["lr"] = g["learning_rate"];
               g.erase("learning_rate");
             }
             return to_python(groups);
           })
      .def_property_readonly("base_learning_rate", [](const PythonPlan& p) { return p.config().schedule.learning_rate; })
      .def_property_readonly("max_norm_rule", [](const PythonPlan& p) { return p.config().max_norm_rule; })
      .def_property_readonly("inputs", [](const PythonPlan& p) { return py::make_tuple(p.io().x, p.io().y); })
      .def("batch", &PythonPlan::batch, "step"_a)
      .def("at", &PythonPlan::at, "step"_a)
      .def("data", &PythonPlan::data, "part"_a);

  // Every option of pens train's table (train/loop/run_kind.h), by its name.
  py::class_<RunOptions> run_options(m, "RunOptions");
  run_options.def(py::init<>());
  py::list option_names;
  for (const RunOptionSpec& spec : run_option_specs()) {
    std::visit([&](auto member) { run_options.def_readwrite(spec.name, member); }, spec.member);
    option_names.append(py::make_tuple(spec.name, spec.low, spec.high));
  }
  m.attr("run_options") = option_names;

  m.def("read_config", [](py::handle path) { return to_python(read_config_file(path_of(path, "path"))); }, "path"_a);

  m.def("load_mnist", [](py::handle dir, const std::string& part) {
          return arrays_of(load_mnist(path_of(dir, "dir"), part));
        }, "dir"_a, "part"_a);

  m.def("set_threads", &set_threads, "threads"_a, "Threads for pens' products (0: every CPU this process may use).");
}
