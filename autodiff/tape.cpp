#include "pens/autodiff/tape.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "pens/autodiff/arena_cache.h"
#include "pens/autodiff/probe_runner.h"
#include "pens/autodiff/tape_plan.h"
#include "pens/graph/infer.h"
#include "pens/graph/noise.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/ir/suggest.h"
#include "pens/ops/parallel.h"

namespace pens {

namespace {
// The arena is planned as offsets first and turned into pointers once it exists.
struct Plan {
  int64_t size = 0;
  int64_t take(int64_t n) {
    const int64_t at = size;
    size += aligned_size(n);
    return at;
  }
};
constexpr int64_t kNone = -1;
}  // namespace

using tape_plan::gradient_flags;
using tape_plan::plan_stacks;
using tape_plan::Stack;

std::vector<std::vector<std::string>> stacked_products(const Graph& g, const CompileOptions& options) {
  std::vector<NodeId> order;
  const std::vector<ValueInfo> values = verify(g, options.batch, &order);
  std::vector<std::vector<std::string>> out;
  if (!options.stack) return out;
  for (const Stack& s : plan_stacks(g, order, values, gradient_flags(g, order, values, options))) {
    out.emplace_back();
    for (NodeId m : s.members) out.back().push_back(g[m].name);
  }
  return out;
}

template <class T>
Tape<T>::Tape(const Graph& g, ParamStore<T>& params, CompileOptions options)
    : options_(options), param_grads_(params.grads()) {
  if constexpr (std::is_same_v<T, float>) require_precision(options.precision, "a tape's products");
  std::vector<NodeId> order;
  const std::vector<ValueInfo> values = verify(g, options.batch, &order);
  const std::vector<char> needs_grad = gradient_flags(g, order, values, options);

  // Stacks, and where their members' first inputs and values lie in their blocks.
  const std::vector<Stack> stacks = options.stack ? plan_stacks(g, order, values, needs_grad) : std::vector<Stack>{};
  struct InBlock {
    int64_t stack = kNone;  // kNone: not in a block
    bool value = false;     // the block of the members' values (else of their first inputs)
    int64_t row = 0;        // its first row in the block
  };
  std::vector<InBlock> in_block(g.size());
  for (size_t i = 0; i < stacks.size(); ++i) {
    int64_t row = 0;
    for (size_t k = 0; k < stacks[i].members.size(); ++k) {
      in_block[stacks[i].firsts[k]] = {static_cast<int64_t>(i), false, row};
      in_block[stacks[i].members[k]] = {static_cast<int64_t>(i), true, row};
      row += values[stacks[i].members[k]].shape[0];
    }
  }
  // A block is taken where its first node is met; blocks[stack][value][gradient].
  std::vector<std::array<std::array<int64_t, 2>, 2>> blocks(stacks.size(), {{{kNone, kNone}, {kNone, kNone}}});
  Plan plan;
  const auto take = [&](NodeId v, bool gradient) {
    const InBlock& b = in_block[v];
    if (b.stack == kNone) return plan.take(values[v].shape.numel());
    const int64_t width = values[v].shape[1];
    int64_t& at = blocks[static_cast<size_t>(b.stack)][b.value][gradient];
    if (at == kNone) at = plan.take(stacks[static_cast<size_t>(b.stack)].rows * width);
    return at + b.row * width;
  };

  // Plan the arena: values and scratch first, then one contiguous gradient region.
  std::vector<int64_t> value_at(g.size(), kNone), grad_at(g.size(), kNone),
      scratch_at(g.size(), kNone), scratch_len(g.size(), 0);
  std::vector<ValueInfo> in_infos;
  std::vector<char> external(g.size(), 0);
  for (const std::string& name : options.external_inputs) {
    const NodeId v = g.at(name);
    if (!is_input(g[v])) fail("external input '", name, "' is not an input of the graph");
    if (in_block[v].stack != kNone) fail("external input '", name, "' is in a stacked product (CompileOptions::stack)");
    external[v] = 1;
  }
  for (NodeId v : order) {
    const Node& n = g[v];
    if (is_param(n) || external[v]) continue;
    value_at[v] = take(v, false);
    if (n.op->scratch) {
      in_infos.clear();
      for (NodeId u : g.inputs(v)) in_infos.push_back(values[u]);
      scratch_len[v] = n.op->scratch(InferCtx(n, in_infos, options.precision), values[v]);
      scratch_at[v] = plan.take(scratch_len[v]);
    }
  }
  const int64_t grad_region = plan.size;
  for (NodeId v : order) {
    if (needs_grad[v] && !is_param(g[v]) && !external[v]) grad_at[v] = take(v, true);
  }
  stand_ins_.resize(2 * options.external_inputs.size());
  memory_ = MemoryCharge(bytes_of(static_cast<uint64_t>(plan.size), sizeof(T), "a tape"),
                         cat("the tape of a ", g.size(), "-node graph at batch ", options_.batch));
  arena_ = ArenaCache<T>::zeros(static_cast<size_t>(plan.size));
  T* base = arena_.data();
  grad_begin_ = base + grad_region;
  grad_end_ = base + plan.size;

  // Slots: where each node's value and gradient live.
  slots_.resize(g.size());
  for (NodeId v : order) {
    const Node& n = g[v];
    Slot& s = slots_[v];
    s.name = n.name;
    s.info = values[v];
    s.is_param = is_param(n);
    s.is_constant = is_constant(n);
    if (s.is_param) {
      const ParamEntry* e = params.find(n.name);
      if (!e) fail("parameter '", n.name, "' is not in the parameter store");
      if (e->shape != values[v].shape) {
        fail("parameter '", n.name, "' has shape ", values[v].shape.str(), " in the graph but ",
             e->shape.str(), " in the parameter store");
      }
      s.value = params.value(*e).data;
      s.grad = needs_grad[v] ? params.grad(*e).data : nullptr;
    } else if (external[v]) {
      T* stand_in = stand_ins_.data() + 2 * unbound_.size();
      s.value = stand_in;
      s.grad = needs_grad[v] ? stand_in + 1 : nullptr;
      unbound_.push_back(v);
    } else {
      s.value = base + value_at[v];
      s.grad = grad_at[v] == kNone ? nullptr : base + grad_at[v];
    }
    by_name_.emplace(n.name, v);
    if (n.has(kLoss)) loss_slots_.push_back(v);
    if (is_constant(n)) {
      TensorView<T> c{s.value, s.info.shape};
      if (n.attrs.has("values")) {
        const std::vector<double> vals = n.attrs.get_floats("values");
        std::transform(vals.begin(), vals.end(), c.data, [](double x) { return static_cast<T>(x); });
      } else {
        c.arr().setConstant(static_cast<T>(n.attrs.get_float("value")));
      }
    }
  }

  // Instructions, then their kernel arguments (the argument spans point into the
  // instructions, so they are built once the program no longer moves).
  // A stack is one instruction, at its first member, over the views of its whole blocks.
  for (NodeId v : order) {
    const Node& n = g[v];
    if (n.op->leaf) continue;
    const Stack* stack = in_block[v].value ? &stacks[static_cast<size_t>(in_block[v].stack)] : nullptr;
    if (stack && stack->members.front() != v) continue;
    Instr ins;
    ins.op = n.op;
    ins.slot = v;
    ins.attrs = n.attrs;
    ins.stream = n.attrs.has("stream") ? static_cast<uint64_t>(n.attrs.get_int("stream"))
                                       : hash_name(n.name);
    // The rows a view covers: the node's own, or its stack's.
    const auto rows = [&](const Shape& shape) { return stack ? Shape{stack->rows, shape[1]} : shape; };
    const std::vector<NodeId> inputs = g.inputs(v);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Slot& in = slots_[inputs[i]];
      const Shape shape = i == 0 ? rows(in.info.shape) : in.info.shape;
      ins.in.push_back({in.value, shape});
      T* gin = n.op->differentiable(i) ? in.grad : nullptr;
      ins.gin.push_back({gin, shape});
    }
    const Slot& out = slots_[v];
    ins.runs_backward =
        out.grad && std::any_of(ins.gin.begin(), ins.gin.end(), [](const auto& t) { return t.data; });
    ins.args.out = {out.value, rows(out.info.shape)};
    ins.args.gout = {out.grad, rows(out.info.shape)};
    if (stack) ins.stacked.assign(stack->members.begin(), stack->members.end());
    if (scratch_at[v] != kNone) ins.args.scratch = {base + scratch_at[v], Shape{scratch_len[v]}};
    if (const ProbeBody* body = g.probe(n.name)) ins.probe = std::make_unique<ProbeRunner>(*this, n, *body, params);
    program_.push_back(std::move(ins));
  }
  for (Instr& ins : program_) {
    ins.args.in = ins.in;
    ins.args.gin = ins.gin;
    ins.args.attrs = &ins.attrs;
    ins.args.node_name = &slots_[ins.slot].name;
    ins.args.precision = options_.precision;  // a double tape's products ignore it (gemm_operands)
  }

  // Row-wise draws over batch rows: those a row placement applies to (noise on a
  // parameter draws the same in every process), a probe's draws per example included. A
  // second inference, so only for graphs that have such ops.
  const auto row_draw = [](const Instr& i) { return i.op->stochastic && (i.op->row_wise || i.probe); };
  if (std::any_of(program_.begin(), program_.end(), row_draw)) {
    const std::vector<char> batched = batch_rows(g, options.batch);
    for (Instr& ins : program_) ins.batch_draw = row_draw(ins) && batched[ins.slot];
  }

  // When each parameter's gradient is complete: after the backward of the first
  // instruction (in program order) that adds to it, the last to run.
  std::vector<char> written(slots_.size(), 0);
  for (Instr& ins : program_) {
    const std::vector<NodeId> inputs = g.inputs(ins.slot);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const NodeId u = inputs[i];
      if (ins.runs_backward && slots_[u].is_param && ins.gin[i].data && !written[u]) {
        written[u] = 1;
        ins.grads_done.push_back(u);
      }
    }
  }
  for (size_t v = 0; v < slots_.size(); ++v) {
    if (slots_[v].is_param && slots_[v].grad && !written[v]) grads_unwritten_.push_back(v);
  }

  plan_first_writes();

  for (const MovingAverage& a : g.averages()) {
    const Slot& source = slots_[g.at(a.source)];
    averages_.push_back({.param = slots_[g.at(a.param)].value, .source = source.value,
                         .size = source.info.shape.numel(), .decay = static_cast<T>(a.decay),
                         .of_batch = !source.is_param});
  }
}

template <class T>
void Tape<T>::update_averages(std::vector<const T*>* moved) {
  for (const Average& a : averages_) {
    if (moved) {
      if (std::find(moved->begin(), moved->end(), a.param) != moved->end()) continue;
      moved->push_back(a.param);
    }
    move_average(a.param, a.source, a.size, a.decay);
  }
}

template <class T>
Tape<T>::~Tape() {
  ArenaCache<T>::give_back(std::move(arena_));
}

template <class T>
size_t Tape<T>::slot_of(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) {
    std::vector<std::string> names;
    for (const auto& [known, slot] : by_name_) names.push_back(known);
    std::sort(names.begin(), names.end());
    fail("the compiled graph has no node named '", name, "'", unknown_name_hint(name, names, "nodes", 12));
  }
  return it->second;
}

template <class T>
TensorView<T> Tape<T>::input(std::string_view name) {
  const Slot& s = slots_[slot_of(name)];
  if (s.is_param) fail("'", name, "' is a parameter; set it in the ParamStore");
  return {s.value, s.info.shape};
}

template <class T>
void Tape<T>::bind_input(std::string_view name, T* value, T* grad) {
  Slot& s = slots_[slot_of(name)];
  if (s.is_param || s.is_constant || !value) fail("bind_input: '", name, "' is not an input, or no memory was given");
  for (Instr& ins : program_) {
    for (TensorView<const T>& in : ins.in) {
      if (in.data == s.value) in.data = value;
    }
    for (TensorView<T>& g : ins.gin) {
      if (s.grad && g.data == s.grad) g.data = grad;
    }
  }
  s.value = value;
  if (s.grad) s.grad = grad;
  std::erase(unbound_, slot_of(name));
}

template <class T>
TensorView<const T> Tape<T>::value(std::string_view name) const {
  const Slot& s = slots_[slot_of(name)];
  return {s.value, s.info.shape};
}

template <class T>
void Tape<T>::add_param_gradients_to(std::span<T> grads) {
  if (grads.size() != param_grads_.size()) {
    fail("add_param_gradients_to: an array of ", grads.size(), " values for a store of ", param_grads_.size());
  }
  if (grads.data() == param_grads_.data()) return;  // already there (a tape reused step after step)
  // Every pointer into the current array moves to the same offset in the new one; slots
  // and instructions are the only holders (first_writes cover the arena alone).
  const auto rebase = [&](T* p) {
    const std::less<const T*> before;
    const bool inside = p && !before(p, param_grads_.data()) && before(p, param_grads_.data() + param_grads_.size());
    return inside ? grads.data() + (p - param_grads_.data()) : p;
  };
  for (Slot& s : slots_) {
    if (s.is_param) s.grad = rebase(s.grad);
  }
  for (Instr& ins : program_) {
    for (TensorView<T>& g : ins.gin) g.data = rebase(g.data);
  }
  param_grads_ = grads;
}

template <class T>
TensorView<const T> Tape<T>::grad(std::string_view name) const {
  const Slot& s = slots_[slot_of(name)];
  return {s.grad, s.info.shape};
}

template <class T>
const ValueInfo& Tape<T>::info(std::string_view name) const {
  return slots_[slot_of(name)].info;
}

template <class T>
void Tape<T>::set_constant(std::string_view name, T value) {
  const Slot& s = slots_[slot_of(name)];
  if (!s.is_constant) fail("'", name, "' is not a constant");
  std::fill(s.value, s.value + s.info.shape.numel(), value);
}

template <class T>
void Tape<T>::set_row_placement(const std::vector<RowRun>& runs) {
  int64_t next = 0;
  for (const RowRun& r : runs) {
    if (r.local != next || r.count < 1 || r.global < 0) {
      fail("a row placement must cover the tape's rows 0..", options_.batch - 1,
           " once, in order, with runs of at least one row; a run {local ", r.local, ", global ", r.global,
           ", count ", r.count, "} follows row ", next - 1);
    }
    next += r.count;
  }
  if (next != options_.batch) fail("a row placement covers ", next, " rows; the tape's batch is ", options_.batch);
  placement_.assign(runs.begin(), runs.end());  // no allocation once it has the capacity
}

template <class T>
void Tape<T>::forward() {
  if (!unbound_.empty()) fail("external input '", slots_[unbound_[0]].name, "' was never bound (bind_input)");
  for (Instr& ins : program_) {
    if (ins.op->stochastic) {
      const uint64_t stream = salt_ != 0 ? mix64(ins.stream ^ salt_) >> 1 : ins.stream;
      ins.args.noise = NoiseStream(key_, stream, ins.batch_draw ? std::span<const RowRun>(placement_)
                                                                : std::span<const RowRun>());
    }
    if (ins.probe) {
      ins.probe->run(*this, ins.args.out, ins.args.noise);
    } else {
      ins.op->template kernels<T>().forward(ins.args);
    }
  }
}

template <class T>
T Tape<T>::objective() const {
  T total = 0;
  for (size_t s : loss_slots_) total += slots_[s].value[0];
  return total;
}

template <class T>
void Tape<T>::report_gradients(const std::vector<size_t>& slots) const {
  for (const size_t v : slots) {
    const Slot& s = slots_[v];
    gradient_ready_(std::span<T>(s.grad, static_cast<size_t>(s.info.shape.numel())));
  }
}

template <class T>
void Tape<T>::plan_first_writes() {
  // Walks the backward order keeping the stretches of the gradient region written so far
  // (disjoint intervals of offsets, start -> end); the loss seeds count as written before
  // any instruction, since backward() sets them first.
  std::map<int64_t, int64_t> written;
  // Appends to `out` the parts of [data, data + size) not yet written, and marks them.
  const auto claim = [&](T* data, int64_t size, std::vector<Range>& out) {
    if (!data || data < grad_begin_ || data >= grad_end_ || size <= 0) return;  // a parameter's, or none
    const int64_t begin = data - grad_begin_, end = begin + size;
    auto it = written.upper_bound(begin);
    if (it != written.begin() && std::prev(it)->second > begin) --it;  // one that covers begin
    int64_t at = begin, first = begin, last = end;
    while (it != written.end() && it->first < end) {
      if (it->first > at) out.push_back({grad_begin_ + at, it->first - at});
      at = std::max(at, it->second);
      first = std::min(first, it->first);
      last = std::max(last, it->second);
      it = written.erase(it);
    }
    if (at < end) out.push_back({grad_begin_ + at, end - at});
    written[first] = last;
  };
  for (size_t v : loss_slots_) claim(slots_[v].grad, slots_[v].info.shape.numel(), zero_first_);
  for (auto it = program_.rbegin(); it != program_.rend(); ++it) {
    if (!it->runs_backward) continue;
    for (const TensorView<T>& gin : it->gin) claim(gin.data, gin.size(), it->first_writes);
  }
  // What no instruction adds to reads as zero: a node's gradient that nothing sends back.
  claim(grad_begin_, grad_end_ - grad_begin_, zero_first_);
}

template <class T>
void Tape<T>::run_backward(bool zero_first_writes) {
  if (gradient_ready_) report_gradients(grads_unwritten_);
  for (auto it = program_.rbegin(); it != program_.rend(); ++it) {
    if (!it->runs_backward) continue;
    if (zero_first_writes) zero(it->first_writes);
    it->op->template kernels<T>().backward(it->args);
    if (gradient_ready_) report_gradients(it->grads_done);
  }
}

template <class T>
void Tape<T>::zero(std::span<const Range> ranges) {
  for (const Range& r : ranges) {
    parallel_ranges(r.size, [&](int64_t begin, int64_t n) { std::fill_n(r.data + begin, n, T(0)); });
  }
}

template <class T>
void Tape<T>::backward() {
  zero(zero_first_);
  for (size_t s : loss_slots_) {
    if (slots_[s].grad) slots_[s].grad[0] += T(1);
  }
  run_backward(true);
}

template <class T>
void Tape<T>::backward_from(std::span<const Seed> seeds) {
  // When no instruction adds to a seeded gradient (a graph's outputs), the gradient region
  // is zeroed as backward() zeroes it, part by part when first written; otherwise whole.
  const auto unwritten = [&](const Slot& s) {
    const T* end = s.grad + s.info.shape.numel();
    return std::any_of(zero_first_.begin(), zero_first_.end(),
                       [&](const Range& r) { return r.data <= s.grad && end <= r.data + r.size; });
  };
  bool part_by_part = true;
  for (const Seed& seed : seeds) {
    const Slot& s = slots_[slot_of(seed.node)];
    part_by_part = part_by_part && (!s.grad || unwritten(s));
  }
  if (part_by_part) {
    zero(zero_first_);
  } else {
    const Range region{grad_begin_, grad_end_ - grad_begin_};
    zero({&region, 1});
  }
  for (const Seed& seed : seeds) {
    const Slot& s = slots_[slot_of(seed.node)];
    if (static_cast<int64_t>(seed.values.size()) != s.info.shape.numel()) {
      fail("seed for '", seed.node, "' has ", seed.values.size(), " elements, the node has ", s.info.shape.numel());
    }
    if (!s.grad) continue;  // nothing upstream needs a gradient
    for (size_t i = 0; i < seed.values.size(); ++i) s.grad[i] += seed.values[i];
  }
  run_backward(part_by_part);
}

template <class T>
void Tape<T>::backward_from(std::string_view node, std::span<const T> seed) {
  const Seed one{node, seed};
  backward_from({&one, 1});
}

template <class T>
std::vector<std::vector<std::string>> Tape<T>::stacks() const {
  std::vector<std::vector<std::string>> out;
  for (const Instr& i : program_) {
    if (i.stacked.empty()) continue;
    out.emplace_back();
    for (size_t v : i.stacked) out.back().push_back(slots_[v].name);
  }
  return out;
}

template <class T>
std::string Tape<T>::first_non_finite() const {
  const auto bad = [](const Slot& s) {
    return s.value && !std::all_of(s.value, s.value + s.info.shape.numel(), [](T x) { return std::isfinite(x); });
  };
  // The slots an instruction computes: its stack's members, or its own.
  const auto made = [](const Instr& i) {
    return i.stacked.empty() ? std::span<const size_t>(&i.slot, 1) : std::span<const size_t>(i.stacked);
  };
  std::vector<char> computed(slots_.size(), 0);
  for (const Instr& i : program_) {
    for (size_t v : made(i)) computed[v] = 1;
  }
  for (size_t v = 0; v < slots_.size(); ++v) {
    if (!computed[v] && bad(slots_[v])) {
      return cat("'", slots_[v].name, "' (", slots_[v].is_param ? "parameter" : "input", ")");
    }
  }
  for (const Instr& i : program_) {
    for (size_t v : made(i)) {
      if (bad(slots_[v])) return cat("'", slots_[v].name, "' (", i.op->name, ")");
    }
  }
  return "";
}

template class Tape<float>;
template class Tape<double>;

}  // namespace pens
