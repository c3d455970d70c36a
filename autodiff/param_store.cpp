#include "pens/autodiff/param_store.h"

#include <algorithm>
#include <cmath>

#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/ops/random.h"

namespace pens {

template <class T>
ParamStore<T>::ParamStore(const Graph& g) {
  int64_t offset = 0;
  for (NodeId v : g.topological_order()) {
    const Node& n = g[v];
    if (!is_param(n)) continue;
    const Shape shape = Shape::from(n.attrs.get_ints("shape"));
    if (shape.has_batch()) fail("parameter '", n.name, "' cannot have a batch dimension");
    index_.emplace(n.name, entries_.size());
    entries_.push_back({n.name, shape, offset});
    offset += aligned_size(shape.numel());
  }
  memory_ = MemoryCharge(bytes_of(static_cast<uint64_t>(offset), 2 * sizeof(T), "the parameters"),
                         cat("the parameters (", entries_.size(), " tensors, values and gradients)"));
  values_.assign(static_cast<size_t>(offset), T(0));
  grads_.assign(static_cast<size_t>(offset), T(0));
}

template <class T>
const ParamEntry* ParamStore<T>::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

template <class T>
const ParamEntry& ParamStore<T>::at(std::string_view name) const {
  const ParamEntry* e = find(name);
  if (!e) fail("no parameter named '", name, "'");
  return *e;
}

template <class T>
int64_t ParamStore<T>::numel() const {
  int64_t n = 0;
  for (const ParamEntry& e : entries_) n += e.shape.numel();
  return n;
}

template <class T>
void ParamStore<T>::zero_grad() {
  T* g = grads_.data();
  parallel_ranges(static_cast<int64_t>(grads_.size()), [&](int64_t begin, int64_t n) { std::fill_n(g + begin, n, T(0)); });
}

template <class T>
void ParamStore<T>::initialize(const Graph& g, uint64_t seed) {
  for (const ParamEntry& e : entries_) {
    const Attributes& a = g[e.name].attrs;
    const std::string& init = a.get_string("init");
    TensorView<T> v = value(e);
    const NoiseStream stream(NoiseKey{seed, 0}, hash_name(e.name));
    if (init == "zeros") {
      v.arr().setZero();
    } else if (init == "constant") {
      v.arr().setConstant(static_cast<T>(a.get_float("value")));
    } else if (init == "normal") {
      stream.normal(v.data, v.size(), static_cast<T>(a.get_float("std")));
    } else if (init == "uniform") {
      const double limit = a.get_float("limit");
      for (int64_t i = 0; i < v.size(); ++i) {
        v[i] = static_cast<T>(limit * (2.0 * stream.uniform(static_cast<uint64_t>(i)) - 1.0));
      }
    } else {
      fail("parameter '", e.name, "': unknown init '", init, "'");
    }
    if (a.has("diagonal")) {
      for (int64_t i = 0; i < e.shape[0]; ++i) v[i * e.shape[0] + i] += static_cast<T>(a.get_float("diagonal"));
    }
  }
  start_averages_at_sources(g);
}

template <typename T>
void ParamStore<T>::start_averages_at_sources(const Graph& g, std::span<const std::string> kept) {
  for (const MovingAverage& a : g.averages()) {
    if (std::find(kept.begin(), kept.end(), a.param) != kept.end()) continue;
    const ParamEntry* source = find(a.source);
    const ParamEntry* target = find(a.param);
    if (source && target && source->shape == target->shape) value(*target).arr() = value(*source).arr();
  }
}

template <typename T>
void ParamStore<T>::update_averages(const Graph& g) {
  for (const MovingAverage& a : g.averages()) {
    const ParamEntry* source = find(a.source);
    if (!source) fail("moving average '", a.param, "' follows '", a.source, "', a computed value, not a parameter");
    move_average(value(a.param).data, value(*source).data, source->shape.numel(), static_cast<T>(a.decay));
  }
}

bool all_finite(std::span<const float> values) {
  return std::all_of(values.begin(), values.end(), [](float x) { return std::isfinite(x); });
}

std::vector<std::string> copy_shared_values(ParamStore<float>& to, const ParamStore<float>& from,
                                            const std::string& from_source) {
  std::vector<std::string> copied;
  for (const ParamEntry& e : to.entries()) {
    const ParamEntry* s = from.find(e.name);
    if (!s) continue;
    if (s->shape != e.shape) {
      fail(from_source, ": parameter '", e.name, "' has shape ", s->shape.str(), ", the model's has ", e.shape.str());
    }
    to.value(e).arr() = from.value(*s).arr();
    copied.push_back(e.name);
  }
  return copied;
}

template class ParamStore<float>;
template class ParamStore<double>;

}  // namespace pens
