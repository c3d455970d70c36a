// The Python package's C++ half, pens._pens: models (load, save, JSON text, inspect,
// parameters as numpy arrays), compiled graphs run forward and backward on numpy arrays,
// gradient checks and training runs. The Python half (python/pens/__init__.py) adds the
// model builder and the Pythonic entry points. Long C++ work runs with the GIL released.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <variant>

#include "pens/autodiff/gradcheck.h"
#include "pens/autodiff/tape.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/serialization/model_file.h"
#include "pens/train/inspect.h"
#include "pens/train/run.h"

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

// A model's graph compiled for one batch size and one precision: the tape, the
// parameters it reads (copied from the model, or initialized) and what it computes.
class Compiled {
 public:
  virtual ~Compiled() = default;
  virtual void feed(const std::string& name, py::array a) = 0;
  virtual void forward() = 0;
  virtual void backward() = 0;
  virtual double objective() const = 0;
  virtual py::array value(const std::string& name, py::handle owner) = 0;
  virtual py::array grad(const std::string& name, py::handle owner) = 0;
  virtual py::dict parameters(py::handle owner, bool grads) = 0;
  virtual void set_noise_key(uint64_t seed, uint64_t step) = 0;
  virtual std::string dtype() const = 0;
  virtual int64_t batch() const = 0;
  std::vector<std::string> inputs, outputs;
};

template <class T>
class CompiledAs final : public Compiled {
 public:
  CompiledAs(const Model& model, Graph graph, int64_t batch_size, uint64_t init_seed) : graph_(std::move(graph)) {
    params_ = std::make_unique<ParamStore<T>>(graph_);
    if (model.values) {
      for (const ParamEntry& e : params_->entries()) {
        const ParamEntry* from = model.values->find(e.name);
        if (!from) fail("the model holds no value for parameter '", e.name, "'");
        const std::span<const float> src = model.values->values().subspan(from->offset, from->shape.numel());
        TensorView<T> dst = params_->value(e);
        for (int64_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<T>(src[static_cast<size_t>(i)]);
      }
    } else {
      params_->initialize(graph_, init_seed);
    }
    tape_ = std::make_unique<Tape<T>>(graph_, *params_, CompileOptions{.batch = batch_size});
    for (NodeId v : graph_.nodes()) {
      if (is_input(graph_[v])) inputs.push_back(graph_[v].name);
      if (graph_[v].has(kOutput)) outputs.push_back(graph_[v].name);
    }
  }

  void feed(const std::string& name, py::array a) override {
    TensorView<T> dst = tape_->input(name);
    const std::vector<py::ssize_t> want = dims(dst.shape);
    const std::vector<py::ssize_t> got(a.shape(), a.shape() + a.ndim());
    if (got != want) {
      fail("input '", name, "' takes an array of shape ", py::str(py::tuple(py::cast(want))).cast<std::string>(),
           ", got ", py::str(py::tuple(py::cast(got))).cast<std::string>());
    }
    const bool index = tape_->info(name).dtype == DType::Index;
    if (index) {
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
  void forward() override {
    py::gil_scoped_release unlocked;
    tape_->forward();
  }
  void backward() override {
    py::gil_scoped_release unlocked;
    tape_->backward();
  }
  double objective() const override { return static_cast<double>(tape_->objective()); }
  py::array value(const std::string& name, py::handle owner) override {
    const TensorView<const T> v = tape_->value(name);
    return view(const_cast<T*>(v.data), v.shape, owner, false);
  }
  py::array grad(const std::string& name, py::handle owner) override {
    if (params_->find(name)) return view(params_->grad(name).data, params_->at(name).shape, owner, false);
    const TensorView<const T> g = tape_->grad(name);
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
  void set_noise_key(uint64_t seed, uint64_t step) override { tape_->set_noise_key({seed, step}); }
  std::string dtype() const override { return std::is_same_v<T, float> ? "float32" : "float64"; }
  int64_t batch() const override { return tape_->batch(); }

 private:
  Graph graph_;
  std::unique_ptr<ParamStore<T>> params_;
  std::unique_ptr<Tape<T>> tape_;
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
      .def_static("load", &load_model, "path"_a, "Reads a model file (and its sidecar).")
      .def_static("from_json", [](const std::string& text, const std::string& dir) { return parse_model(text, "<json>", dir); },
                  "text"_a, "dir"_a = ".", "Parses model JSON text; a sidecar is looked for in `dir`.")
      .def("to_json", [](const Model& model) { return write_model(model, ValueStorage::Inline, "").json; },
           "The canonical JSON text, values inline.")
      .def("save", [](const Model& model, const std::string& path, const std::string& storage) {
             save_model(model, path, storage_of(storage));
           }, "path"_a, "storage"_a = "auto")
      .def_property_readonly("trained", [](const Model& model) { return model.values != nullptr; })
      .def_property_readonly("is_tree_model", [](const Model& model) { return model.tree.has_value(); })
      .def("initialize", [](Model& model, uint64_t seed) {
             model.values = std::make_shared<ParamStore<float>>(model.graph);
             model.values->initialize(model.graph, seed);
           }, "seed"_a = 1, "Gives the parameters values from their init attributes.")
      .def("parameters", [](py::object self) {
             Model& model = self.cast<Model&>();
             if (!model.values) fail("the model holds no parameter values (initialize() or train it first)");
             py::dict out;
             for (const ParamEntry& e : model.values->entries()) {
               out[py::str(e.name)] = view(model.values->value(e).data, e.shape, self, true);
             }
             return out;
           }, "The parameter values: float32 arrays over the model's own memory (writes change the model).")
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
      .def_property_readonly("batch", &Compiled::batch)
      .def("feed", &Compiled::feed, "name"_a, "array"_a)
      .def("run_forward", &Compiled::forward)
      .def("run_backward", &Compiled::backward)
      .def_property_readonly("objective", &Compiled::objective)
      .def("set_noise_key", &Compiled::set_noise_key, "seed"_a, "step"_a = 0)
      .def("value", [](py::object self, const std::string& name) { return self.cast<Compiled&>().value(name, self); })
      .def("grad", [](py::object self, const std::string& name) { return self.cast<Compiled&>().grad(name, self); })
      .def("parameters", [](py::object self) { return self.cast<Compiled&>().parameters(self, false); })
      .def("grads", [](py::object self) { return self.cast<Compiled&>().parameters(self, true); });

  m.def("compile", [](const Model& model, int64_t batch, const std::string& dtype, const std::string& graph,
                      int64_t samples, std::optional<int64_t> children, std::optional<int64_t> labeled,
                      uint64_t init_seed) -> std::unique_ptr<Compiled> {
          Graph g;
          if (graph == "inference") {
            if (model.tree) fail("tree models compile per tree: give graph='training' with a tree (not built yet)");
            if (samples < 0) fail("samples must be at least 0, got ", samples);
            g = build_inference(model.graph, samples);
          } else if (graph == "training") {
            g = build_graph(model, build_options(batch, children, labeled, false, std::nullopt)).graph;
          } else if (graph == "parent") {
            g = model.graph;
          } else {
            fail("graph must be 'inference', 'training' or 'parent', got '", graph, "'");
          }
          if (batch < 1) fail("batch must be at least 1, got ", batch);
          if (dtype == "float32") return std::make_unique<CompiledAs<float>>(model, std::move(g), batch, init_seed);
          if (dtype == "float64") return std::make_unique<CompiledAs<double>>(model, std::move(g), batch, init_seed);
          fail("dtype must be 'float32' or 'float64', got '", dtype, "'");
        }, "model"_a, "batch"_a, "dtype"_a = "float32", "graph"_a = "inference", "samples"_a = 0,
        "children"_a = py::none(), "labeled"_a = py::none(), "init_seed"_a = 1);

  m.def("gradcheck", [](const Model& model, int64_t batch, std::optional<int64_t> children,
                        std::optional<int64_t> labeled, bool parent, std::optional<int64_t> sample, double tolerance,
                        double step, uint64_t init_seed) {
          if (!(tolerance > 0)) fail("tolerance must be above 0, got ", tolerance);
          if (!(step > 0)) fail("step must be above 0, got ", step);
          const BuiltGraph built = build_graph(model, build_options(batch, children, labeled, parent, std::nullopt));
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
        "sample"_a = py::none(), "tolerance"_a = 1e-6, "step"_a = 1e-5, "init_seed"_a = 1);

  m.def("train", [](const std::string& config, const RunOptions& options, py::object callback) {
          const PreparedRun run = prepare_run(config, options);
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
        }, "config"_a, "options"_a, "callback"_a = py::none());

  py::class_<RunOptions>(m, "RunOptions")
      .def(py::init<>())
      .def_readwrite("out", &RunOptions::out)
      .def_readwrite("init", &RunOptions::init)
      .def_readwrite("data_dir", &RunOptions::data_dir)
      .def_readwrite("seed", &RunOptions::seed)
      .def_readwrite("epochs", &RunOptions::epochs)
      .def_readwrite("budget_minutes", &RunOptions::budget_minutes)
      .def_readwrite("threads", &RunOptions::threads)
      .def_readwrite("labels", &RunOptions::labels)
      .def_readwrite("split_seed", &RunOptions::split_seed)
      .def_readwrite("resume", &RunOptions::resume)
      .def_readwrite("resume_from", &RunOptions::resume_from);

  m.def("set_threads", &set_threads, "threads"_a, "Threads for pens' products (0: every CPU this process may use).");
}
