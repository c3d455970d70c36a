// The tape: a graph compiled once into a flat list of instructions in topological
// order, with every buffer (values, gradients, per-op scratch) planned into one arena
// allocated at compile time. forward() and backward() then run the kernels over fixed
// pointers: no allocation, no graph walking, no lookups by name in the steady state.
//
// Parameters are not copied: the tape points into a ParamStore, and backward() ADDS the
// parameter gradients into the store's gradient array (zero it between steps with
// ParamStore::zero_grad), so several tapes (one per tree, say) can accumulate into
// one minibatch gradient.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pens/autodiff/param_store.h"
#include "pens/graph/graph.h"
#include "pens/ops/precision.h"
#include "pens/ops/ir/memory.h"
#include "pens/ops/ir/value.h"
#include "pens/ops/op.h"

namespace pens {

struct CompileOptions {
  int64_t batch = 1;         // bound to every kBatch dimension of the inputs
  bool grad_inputs = false;  // also compute gradients with respect to real inputs
  std::vector<std::string> grad_inputs_named = {};  // ... or with respect to these real inputs only
  bool param_grads = true;   // false: backward() adds nothing into the parameter store
  // Nodes of an op that stacks rows (OpDef::stacks_rows: x·W, x·W + b) reading the same
  // other inputs, such as one layer of a parent and of its children, which share their
  // weights, run as one product over their stacked rows: their first inputs lie one after
  // another in one block of the arena, their outputs in another (their gradients too), so
  // one kernel call reads and writes every member's memory in place. The same values as
  // separate products up to the order of float sums; false computes each node alone.
  bool stack = true;
  // Inputs that take no arena memory: bind_input must give their value (and gradient)
  // before the first forward(). For a tape that reads a large value another tape keeps.
  std::vector<std::string> external_inputs = {};
  // The matrix products' precision (ops/precision.h): bfloat16 runs a float tape's matmul
  // and affine products on oneDNN; a double tape ignores it.
  Precision precision = Precision::Float32;
};

// The stacks a tape of g compiled with `options` runs (CompileOptions::stack): each one's
// nodes, in the order of their rows. Tape::stacks() of such a tape gives the same; this
// needs no parameters or memory (pens inspect).
std::vector<std::vector<std::string>> stacked_products(const Graph& g, const CompileOptions& options);

template <class T>
class Tape {
 public:
  Tape(const Graph& g, ParamStore<T>& params, CompileOptions options = {});
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;
  ~Tape();

  // The noise every stochastic op draws in the next forward(): replaying a key replays
  // every mask and every Gaussian draw exactly. Each op draws at its own site (its
  // `stream` attribute, or its name), so one key serves the whole graph.
  void set_noise_key(NoiseKey key) { key_ = key; }
  // Stochastic ops draw from mix64(stream ^ salt) >> 1 instead of their own stream (0:
  // their own): what unroll_tree gives the copy of a cell's stochastic node in an
  // instance whose suffix hashes to `salt`, so a tape of the cell's subgraph, run for one
  // level of a tree, draws what that level draws in the unrolled tree.
  void set_stream_salt(uint64_t salt) { salt_ = salt; }
  // Places this tape's batch rows in a global batch, for the draws over batch rows: a
  // process of a data-parallel run computing a shard draws what a one-process run draws
  // for those rows. It applies to the row-wise stochastic ops (kRowWise: dropout,
  // gaussian_noise) on values with batch rows. The runs must cover rows 0 .. batch - 1
  // once, in order.
  void set_row_placement(const std::vector<RowRun>& runs);

  // Called during backward() as soon as a parameter's gradient in the store is complete
  // (no instruction left adds to it): a data-parallel step starts summing it across
  // processes while the layers below are still being differentiated. Every parameter
  // with a gradient is reported once per backward(); unset: nothing is called.
  using GradientReady = std::function<void(std::span<T> grad)>;
  void set_gradient_ready(GradientReady ready) { gradient_ready_ = std::move(ready); }
  // From now on backward() adds the parameter gradients into `grads`, an array laid out
  // as the store's grads() (of the same size), instead of into the store: tapes running
  // side by side on several threads each add into their own.
  void add_param_gradients_to(std::span<T> grads);

  // Write an input here before forward(). Index inputs hold integers as T.
  TensorView<T> input(std::string_view name);
  // The input's value is read from `value`, and its gradient (with grad_inputs) added into
  // `grad`, caller memory of the input's size that must outlive the tape's use, instead of
  // the arena: another tape's output read in place, one gradient summed over several
  // tapes. backward() and backward_from() do not zero `grad`.
  void bind_input(std::string_view name, T* value, T* grad);
  // Any node's value after forward().
  TensorView<const T> value(std::string_view name) const;
  // A node's gradient after backward(): d objective / d node. Null when the node needs
  // none. For parameters this is the ParamStore's (accumulated) gradient, or the array
  // given to add_param_gradients_to.
  TensorView<const T> grad(std::string_view name) const;
  const ValueInfo& info(std::string_view name) const;
  // Sets every element of a constant node between steps (a penalty weight following its
  // schedule, say). Only constants can be changed this way.
  void set_constant(std::string_view name, T value);

  void forward();
  // The sum of the loss nodes after forward().
  T objective() const;
  // The loss nodes, the terms of the objective, in topological order, and each one's
  // value after forward().
  size_t loss_count() const { return loss_slots_.size(); }
  const std::string& loss_name(size_t i) const { return slots_[loss_slots_[i]].name; }
  T loss_value(size_t i) const { return slots_[loss_slots_[i]].value[0]; }
  // After forward(): the first node holding a NaN or an infinity, as "'name' (op)":
  // inputs and parameters first (a value that came in bad), then the ops in the order
  // they ran, so the op that made the first bad value is named. "" when all are finite.
  // It reads every value: for diagnosing a failed step, not for every step.
  std::string first_non_finite() const;
  // Gradients of objective(); parameter gradients are added into the ParamStore.
  void backward();
  // Gradients of <seed, node's value> instead: one row of a Jacobian per call.
  void backward_from(std::string_view node, std::span<const T> seed);
  // Gradients of the sum of <seed, node's value> over several nodes, in one pass.
  struct Seed {
    std::string_view node;
    std::span<const T> values;
  };
  void backward_from(std::span<const Seed> seeds);
  // Moves each moving average of the graph (graph/graph.h, MovingAverage) toward its
  // source: param = decay · param + (1 − decay) · source, the source as the last forward()
  // left it (a batch statistic) or as the store holds it now (a parameter, after the
  // optimizer's update). The Step calls it after every update. With `moved`, an average
  // whose parameter is listed there is left alone and each one moved is added to it, so
  // that the tapes of one step, sharing a store, move each average once.
  void update_averages(std::vector<const T*>* moved = nullptr);
  // Whether a moving average follows a value computed from the batch (a batch statistic).
  bool averages_batch_values() const {
    return std::any_of(averages_.begin(), averages_.end(), [](const Average& a) { return a.of_batch; });
  }

  // The stacks this tape runs (CompileOptions::stack): each one's nodes, in the order of
  // their rows in its blocks.
  std::vector<std::vector<std::string>> stacks() const;

  int64_t batch() const { return options_.batch; }
  // The arena, for tests and memory reports.
  const T* arena_data() const { return arena_.data(); }

 private:
  class ProbeRunner;  // a probe node's body on a tape of its own (tape.cpp)
  struct Slot {
    std::string name;
    ValueInfo info;
    T* value = nullptr;
    T* grad = nullptr;  // null: no gradient flows through this node
    bool is_param = false;
    bool is_constant = false;
  };
  // Elements [data, data + size) of the arena.
  struct Range {
    T* data;
    int64_t size;
  };
  struct Instr {
    const OpDef* op = nullptr;
    size_t slot = 0;
    Attributes attrs;
    uint64_t stream = 0;
    std::vector<TensorView<const T>> in;
    std::vector<TensorView<T>> gin;
    KernelArgs<T> args;
    bool runs_backward = false;
    bool batch_draw = false;          // a row-wise stochastic op drawing over batch rows
    std::vector<size_t> grads_done;   // parameter slots whose gradient is complete after its backward
    std::unique_ptr<ProbeRunner> probe;  // a probe node: computed by its body, not by a kernel
    std::vector<size_t> stacked;      // a stack's member slots (CompileOptions::stack); empty: `slot` alone
    std::vector<Range> first_writes;  // gradient memory its backward is the first to add to
  };

  size_t slot_of(std::string_view name) const;
  static void zero(std::span<const Range> ranges);
  // zero_first_writes: each instruction zeroes the gradient memory it is the first to add
  // to just before its backward (Instr::first_writes); false when all of it is zero already.
  void run_backward(bool zero_first_writes);
  void plan_first_writes();
  void report_gradients(const std::vector<size_t>& slots) const;

  CompileOptions options_;
  NoiseKey key_;
  uint64_t salt_ = 0;
  std::vector<Slot> slots_;
  std::unordered_map<std::string, size_t> by_name_;
  std::vector<Instr> program_;  // non-leaf nodes, topological order
  std::vector<size_t> loss_slots_;
  std::vector<RowRun> placement_;         // empty: the batch is the global batch
  std::vector<size_t> grads_unwritten_;   // parameter slots with a gradient no instruction adds to
  struct Average {
    T* param;
    const T* source;
    int64_t size;
    T decay;
    bool of_batch;  // the source is computed in forward(), not a parameter
  };
  std::vector<Average> averages_;
  GradientReady gradient_ready_;
  std::span<T> param_grads_;  // where parameter gradients are added: the store's, or add_param_gradients_to's
  // CompileOptions::external_inputs: a value and a gradient stand-in for each until
  // bind_input replaces them (never read: forward() refuses while one is unbound).
  std::vector<T> stand_ins_;
  std::vector<size_t> unbound_;  // their slots, until bound
  MemoryCharge memory_;  // the arena against pens' memory limit (ops/ir/memory.h)
  std::vector<T, Eigen::aligned_allocator<T>> arena_;
  // The arena's gradient region. backward() zeroes each part of it when it is needed:
  // the parts no instruction adds to (the loss seeds among them) first, the others just
  // before the backward of the first instruction that adds to them, so a stretch is
  // still in cache when its kernel adds to it (one sweep over the whole region ahead of
  // the pass measured slower: docs/performance-history.md).
  T* grad_begin_ = nullptr;
  T* grad_end_ = nullptr;
  std::vector<Range> zero_first_;
};

}  // namespace pens
