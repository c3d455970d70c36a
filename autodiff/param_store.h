// Parameter values and their gradients, kept apart from any graph or tape: a model's
// parameters are shared by every graph that names them (the parent, a pseudo-ensemble
// built from it, one graph per sentence tree) and by the optimizer. Values and
// gradients are each one contiguous array, so an optimizer step is one loop and a
// checkpoint is one write.
#pragma once

#include <Eigen/Core>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pens/graph/graph.h"
#include "pens/ops/ir/memory.h"
#include "pens/ops/tensor.h"

namespace pens {

struct ParamEntry {
  std::string name;
  Shape shape;
  int64_t offset = 0;  // into values() and grads(), in elements
};

template <class T>
class ParamStore {
 public:
  ParamStore() = default;
  // One entry per parameter node of `g`, all zero. The layout is fixed from here on:
  // tapes keep pointers into it, so the store must stay alive, and in place, while
  // tapes compiled against it run.
  explicit ParamStore(const Graph& g);

  const std::vector<ParamEntry>& entries() const { return entries_; }
  const ParamEntry* find(std::string_view name) const;
  const ParamEntry& at(std::string_view name) const;  // throws naming the parameter

  TensorView<T> value(std::string_view name) { return view(values_, at(name)); }
  TensorView<T> grad(std::string_view name) { return view(grads_, at(name)); }
  TensorView<T> value(const ParamEntry& e) { return view(values_, e); }
  TensorView<T> grad(const ParamEntry& e) { return view(grads_, e); }
  TensorView<const T> value(const ParamEntry& e) const { return {values_.data() + e.offset, e.shape}; }

  std::span<T> values() { return values_; }
  std::span<T> grads() { return grads_; }
  std::span<const T> values() const { return values_; }
  std::span<const T> grads() const { return grads_; }
  int64_t numel() const;  // parameters, not counting alignment padding

  void zero_grad();
  // Fills every parameter from its node's init attributes (zeros, constant, normal,
  // uniform). Each parameter draws from its own stream (seed, name), so the values do
  // not depend on the order parameters were declared in. A parameter holding the moving
  // average of another parameter (graph/graph.h: a mean teacher's) then starts equal to it.
  void initialize(const Graph& g, uint64_t seed);
  // Sets every moving average of a parameter to its source's value, except the averages
  // named in `kept` (values loaded from a file that had them).
  void start_averages_at_sources(const Graph& g, std::span<const std::string> kept = {});
  // One update of every moving average of g whose source is a parameter (move_average),
  // as Tape::update_averages makes it. For steps whose graphs keep no averages of their
  // own (a tree step on TreeTapes); an average of a computed value (a batch statistic) is
  // refused.
  void update_averages(const Graph& g);

 private:
  using Buffer = std::vector<T, Eigen::aligned_allocator<T>>;
  static TensorView<T> view(Buffer& b, const ParamEntry& e) { return {b.data() + e.offset, e.shape}; }
  std::vector<ParamEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
  MemoryCharge memory_;  // values_ and grads_ against pens' memory limit (ops/ir/memory.h)
  Buffer values_;
  Buffer grads_;
};

// Whether every value is finite (no NaN, no infinity): what a checkpoint must hold.
// One step of a moving average: average = decay · average + (1 − decay) · source, element
// by element (every path that moves averages computes it here, so they agree to the bit).
template <class T>
void move_average(T* average, const T* source, int64_t size, T decay) {
  for (int64_t i = 0; i < size; ++i) average[i] = decay * average[i] + (T(1) - decay) * source[i];
}

bool all_finite(std::span<const float> values);

// Copies into `to` the values of every parameter that `from` holds under the same name
// (shapes must agree: an Error names `from_source` and the first that does not); returns
// the names copied, in `to`'s order.
std::vector<std::string> copy_shared_values(ParamStore<float>& to, const ParamStore<float>& from,
                                            const std::string& from_source);

}  // namespace pens
