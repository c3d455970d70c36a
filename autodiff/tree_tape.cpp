#include "pens/autodiff/tree_tape.h"

#include <algorithm>
#include <utility>

#include "pens/graph/infer.h"
#include "pens/graph/pass.h"
#include "pens/ops/bilinear.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/op.h"
#include "pens/ops/random.h"

namespace pens {

// A port's subgraph and its tapes by row count; a count met more than once in one tree
// (levels of equal width) gets a tape per use, since each keeps its level's values for
// backward().
struct TreeTape::Port {
  Graph graph;
  std::string out;                  // the port's node
  std::vector<std::string> inputs;  // the port's real inputs (the child ports; node)
  std::vector<std::string> shared;  // the shared values it reads and sends gradients to
  std::map<int64_t, std::vector<std::unique_ptr<Tape<float>>>> tapes;
  // Bilinear nodes whose weight (a parameter, or a shared value nothing else in the port
  // reads) gets its gradient once per tree, from all levels' rows in one product
  // (add_bilinear_weight_gradient), rather than from each level's tape: each of those
  // products read and wrote all of dT for the few rows of a level.
  struct Deferred {
    std::string node, v1, v2;  // the bilinear node and its two vector inputs
    std::string weight;        // the parameter or shared value
    bool param = false;        // a parameter: read in place as input `weight + "@value"`
  };
  std::vector<Deferred> deferred;
};

namespace {

bool is_leaf_node(const Node& n) { return is_input(n) || is_param(n) || is_constant(n); }

}  // namespace

TreeTape::TreeTape(const Graph& cell, const TreePorts& ports, ParamStore<float>& params, double loss_scale,
                   bool forward_only, Precision precision)
    : params_(params),
      loss_scale_(loss_scale),
      forward_only_(forward_only),
      precision_(precision),
      words_port_(ports.words) {
  // A perturbed cell does not verify as a whole (its child's node vectors may be a
  // subspace, narrower than the ports declare): its parts are verified one by one, the
  // ports' inputs as wide as the leaves turn out.
  const std::vector<NodeId> order = cell.topological_order();
  // What depends on no input: computed once per tree (unroll_tree shares it the same way).
  std::vector<char> invariant(cell.size(), 0);
  for (NodeId v : order) {
    const std::vector<NodeId> inputs = cell.inputs(v);
    invariant[v] = !is_input(cell[v]) &&
                   std::all_of(inputs.begin(), inputs.end(), [&](NodeId u) { return invariant[u] != 0; });
  }
  // Shared values: computed invariant nodes that a port's input-dependent node reads.
  std::vector<char> shared(cell.size(), 0);
  const std::vector<std::pair<std::string, std::vector<std::string>>> port_list = {
      {ports.leaf, {}}, {ports.compose, ports.children}, {ports.scores, {ports.node}}};
  std::vector<std::vector<char>> reach;
  for (const auto& port : port_list) {
    const auto out = cell.find(port.first);
    if (!out) fail("tree cell: no node '", port.first, "' for a port");
    reach.push_back(ancestors(cell, *out));
    if (port.first == ports.leaf) continue;  // the leaf port computes what it reads (below)
    for (NodeId v : order) {
      if (!reach.back()[v] || invariant[v]) continue;
      for (NodeId u : cell.inputs(v)) shared[u] = shared[u] || (invariant[u] && !is_leaf_node(cell[u]));
    }
  }
  std::map<NodeId, ValueInfo> shared_info;
  std::vector<NodeId> shared_nodes;
  for (NodeId v : order) {
    if (shared[v]) shared_nodes.push_back(v);
  }
  // A fuzzed parameter that only a bilinear's weight reads (CTN+F's T): the fuzz passes
  // its gradient through unchanged (gaussian_noise: dx = dy), so the compose port's
  // deferred weight gradient adds straight into the parameter's, and the shared tape
  // neither zeroes a gradient for the fuzzed copy nor adds it over: two passes over T
  // per tree saved. The parameter is frozen in the shared tape's graph alone.
  std::vector<NodeId> frozen_in_shared;
  const auto ports_read = [&](NodeId v) { return reach[0][v] || reach[1][v] || reach[2][v]; };
  for (NodeId s : shared_nodes) {
    const std::vector<NodeId> in = cell.inputs(s);
    const std::vector<NodeId> readers = cell.consumers(s);
    if (cell[s].op->name != "gaussian_noise" || in.size() != 1 || readers.size() != 1) continue;
    const NodeId p = in[0], b = readers[0];
    const std::vector<NodeId> param_readers = cell.consumers(p);
    if (!is_param(cell[p]) || cell[p].has(kFrozen) ||
        std::any_of(param_readers.begin(), param_readers.end(), [&](NodeId c) { return c != s && ports_read(c); })) {
      continue;  // a node the ports run reads the parameter too (a clean parent, which no port reads, may)
    }
    if (cell[b].op->name != "bilinear" || cell.inputs(b)[1] != s) continue;
    if (!reach[1][b] || reach[0][b] || reach[2][b]) continue;  // the compose port's alone
    gradient_into_param_[cell[s].name] = cell[p].name;
    frozen_in_shared.push_back(p);
  }
  if (!shared_nodes.empty()) {
    std::vector<char> keep(cell.size(), 0);
    for (NodeId s : shared_nodes) {
      const std::vector<char> a = ancestors(cell, s);
      for (size_t v = 0; v < a.size(); ++v) keep[v] = keep[v] || a[v];
    }
    std::vector<NodeId> to_new;
    Graph g = copy_subgraph(cell, keep, &to_new);
    for (NodeId s : shared_nodes) g.set_flag(to_new[s], kOutput);
    for (NodeId p : frozen_in_shared) g.set_flag(to_new[p], kFrozen);
    const std::vector<ValueInfo> info = verify(g);
    for (NodeId s : shared_nodes) {
      shared_info[s] = info[to_new[s]];
      shared_names_.push_back(cell[s].name);
      const bool through = gradient_into_param_.contains(cell[s].name);
      shared_grads_.emplace_back(through ? 0 : static_cast<size_t>(info[to_new[s]].shape.numel()), 0.0f);
    }
    shared_ = std::make_unique<Tape<float>>(g, params_);
  }
  // Each port's subgraph, the shared values coming in as inputs: the leaf port first,
  // which says how wide node vectors are.
  std::vector<std::unique_ptr<Port>> made;
  for (size_t p = 0; p < port_list.size(); ++p) {
    auto port = std::make_unique<Port>();
    port->out = port_list[p].first;
    port->inputs = port_list[p].second;
    Graph& g = port->graph;
    std::vector<NodeId> copy(cell.size(), 0);
    const bool leaf = p == 0;
    for (NodeId v : order) {
      if (!reach[p][v]) continue;
      const Node& n = cell[v];
      if (shared[v] && !leaf) {
        copy[v] = g.input(n.name, shared_info[v].shape, shared_info[v].dtype);
        if (shared_info[v].dtype == DType::Real) port->shared.push_back(n.name);
      } else if (invariant[v] && !is_leaf_node(n) && !leaf) {
        continue;  // read by shared values alone
      } else if (std::find(port->inputs.begin(), port->inputs.end(), n.name) != port->inputs.end()) {
        copy[v] = g.input(n.name, Shape{kBatch, dim_});
      } else if (is_leaf_node(n)) {  // the words, a parameter, a constant: as it is
        copy[v] = g.add(n.op->name, {}, n.attrs, n.name);
        g.node(copy[v]) = n;
      } else {
        std::vector<NodeId> inputs;
        for (NodeId u : cell.inputs(v)) inputs.push_back(copy[u]);
        copy[v] = g.add(n.op->name, inputs, n.attrs, n.name);
        Node& w = g.node(copy[v]);
        w.layer = n.layer, w.role = n.role, w.noise = n.noise;
        w.flags = n.flags & kFrozen;
        if (leaf && n.op->stochastic && !invariant[v]) {
          w.attrs.set("stream", static_cast<int64_t>(mix64(static_cast<uint64_t>(n.attrs.get_int("stream")) ^
                                                            hash_name("leaves")) >> 1));
        }
      }
    }
    g.set_flag(g.at(port->out), kOutput);
    if (p == 1) {
      defer_weight_gradients(*port);
      for (const auto& into : gradient_into_param_) {
        const bool deferred = std::any_of(port->deferred.begin(), port->deferred.end(),
                                          [&](const Port::Deferred& d) { return d.weight == into.first; });
        if (!deferred) {
          fail("TreeTape: the gradient of '", into.first, "' was to go into '", into.second, "' but is not deferred");
        }
      }
    }
    if (leaf) {
      // The leaf port draws its noise once per tree, so its streams are set here, as
      // unroll_tree sets them for its "leaves" instance; then, as a tree's graph does, it
      // looks up the rows of the word table before their noise (the table's fuzz drawn
      // for the looked-up rows alone, as for the whole table).
      g = within_pass("lookup-first, prune-dead-nodes", [&] { return PruneDeadNodes().run(LookupFirst().run(g)); });
    }
    const std::vector<ValueInfo> info =
        within_pass(cat("tree tape, port '", port->out, "'"), [&] { return verify(g); });
    const Shape& shape = info[g.at(port->out)].shape;
    if (p == 0) {
      if (shape.rank != 2 || !g.find(ports.words)) fail("tree cell: leaf port '", port->out, "' must map the words to [-1, n]");
      dim_ = shape[1];
    } else if (p == 1 && (shape.rank != 2 || shape[1] != dim_)) {
      fail("tree cell: compose port '", port->out, "' is ", shape.str(), " but leaves are [-1, ", dim_, "]");
    } else if (p == 2) {
      if (shape.rank != 2) fail("tree cell: scores port '", port->out, "' must be [-1, classes]");
      classes_ = shape[1];
    }
    made.push_back(std::move(port));
  }
  leaf_ = std::move(made[0]), compose_ = std::move(made[1]), scores_port_ = std::move(made[2]);
}

TreeTape::~TreeTape() = default;

void TreeTape::defer_weight_gradients(Port& port) {
  Graph& g = port.graph;
  bool replaced = false;
  for (NodeId b : g.nodes()) {
    if (g[b].op->name != "bilinear") continue;
    const std::vector<NodeId> in = g.inputs(b);
    const NodeId t = in[1];
    const Node& weight = g[t];
    const auto shared = std::find(port.shared.begin(), port.shared.end(), weight.name);
    const bool param = is_param(weight) && !weight.has(kFrozen);
    if (g.consumers(t).size() != 1 || (!param && shared == port.shared.end())) continue;
    port.deferred.push_back({g[b].name, g[in[0]].name, g[in[2]].name, weight.name, param});
    if (param) {
      // The port's tapes read the parameter in place and compute no gradient for it.
      const NodeId value = g.input(cat(weight.name, "@value"), params_.at(weight.name).shape);
      g.replace_uses(t, value);
      replaced = true;
    } else {
      port.shared.erase(shared);  // no gradient from the port's tapes
    }
  }
  if (replaced) g = PruneDeadNodes().run(g);
}

Tape<float>& TreeTape::port_tape(Port& port, int64_t rows, size_t use) {
  // Without a backward pass no level's values are read again: its tape serves the next.
  if (forward_only_) use = 0;
  std::vector<std::unique_ptr<Tape<float>>>& tapes = port.tapes[rows];
  while (tapes.size() <= use) {
    std::vector<std::string> grads;
    if (!forward_only_) {
      grads = port.inputs;
      grads.insert(grads.end(), port.shared.begin(), port.shared.end());
    }
    std::vector<std::string> external;
    for (const std::string& name : shared_names_) {
      if (port.graph.find(name)) external.push_back(name);
    }
    for (const Port::Deferred& d : port.deferred) {
      if (d.param) external.push_back(cat(d.weight, "@value"));
    }
    auto tape = std::make_unique<Tape<float>>(
        port.graph, params_,
        CompileOptions{.batch = rows,
                       .grad_inputs_named = grads,
                       .param_grads = !forward_only_,
                       .stack = false,
                       .external_inputs = external,
                       .precision = precision_});
    // The shared values are read where the shared tape keeps them, and their gradients
    // summed over every port tape.
    for (size_t k = 0; k < shared_names_.size(); ++k) {
      if (!port.graph.find(shared_names_[k])) continue;
      float* value = const_cast<float*>(shared_->value(shared_names_[k]).data);  // read only
      tape->bind_input(shared_names_[k], value, shared_grads_[k].data());
    }
    for (const Port::Deferred& d : port.deferred) {
      if (d.param) tape->bind_input(cat(d.weight, "@value"), params_.value(d.weight).data, nullptr);
    }
    tapes.push_back(std::move(tape));
  }
  return *tapes[use];
}

Tape<float>& TreeTape::loss_tape(int64_t labeled) {
  std::unique_ptr<Tape<float>>& tape = losses_[labeled];
  if (!tape) {
    Graph g;
    const NodeId scores = g.input("scores", Shape{labeled, classes_});
    const NodeId labels = g.input("labels", Shape{labeled}, DType::Index);
    add_tree_loss(g, scores, labels, loss_scale_);
    tape = std::make_unique<Tape<float>>(g, params_, CompileOptions{.grad_inputs_named = {"scores"}});
  }
  return *tape;
}

void TreeTape::use(Tape<float>& tape, uint64_t salt) {
  tape.set_noise_key(key_);
  tape.set_stream_salt(salt);
  if (!grads_.empty()) tape.add_param_gradients_to(grads_);
}

void TreeTape::set_tree(const TreeShape& shape, std::span<const int32_t> words, std::span<const int32_t> labels) {
  const int64_t size = shape.size();
  if (static_cast<int64_t>(words.size()) != size || static_cast<int64_t>(labels.size()) != size) {
    fail("TreeTape: ", size, " nodes but ", words.size(), " word ids and ", labels.size(), " labels");
  }
  TreeLevels layout = tree_levels(shape, static_cast<int64_t>(compose_->inputs.size()), "TreeTape");
  levels_ = std::move(layout.levels);
  row_of_ = std::move(layout.row_of);
  shape_ = shape;
  words_.clear();
  for (int32_t node : levels_[0]) words_.push_back(static_cast<float>(words[static_cast<size_t>(node)]));
  labels_.clear(), labeled_rows_.clear();
  std::vector<std::pair<int32_t, int32_t>> labeled;  // (row, class)
  for (int64_t i = 0; i < size; ++i) {
    if (labels[static_cast<size_t>(i)] >= 0) labeled.emplace_back(row_of_[static_cast<size_t>(i)], labels[static_cast<size_t>(i)]);
  }
  std::sort(labeled.begin(), labeled.end());
  for (const auto& item : labeled) {
    labeled_rows_.push_back(static_cast<float>(item.first));
    labels_.push_back(static_cast<float>(item.second));
  }
  vectors_.assign(static_cast<size_t>(size * dim_), 0.0f);
  vector_grads_.assign(vectors_.size(), 0.0f);
  scores_.assign(static_cast<size_t>(size * classes_), 0.0f);
  score_grads_.assign(scores_.size(), 0.0f);
}

void TreeTape::forward() {
  if (levels_.empty()) fail("TreeTape: forward() before set_tree()");
  objective_ = 0;
  level_tapes_.clear();
  scores_tape_ = nullptr, loss_ = nullptr;
  if (shared_) {
    use(*shared_, 0);
    shared_->forward();
  }
  const auto n = static_cast<size_t>(dim_);
  const auto leaves = static_cast<int64_t>(levels_[0].size());
  Tape<float>& leaf = port_tape(*leaf_, leaves, 0);
  use(leaf, 0);  // its streams are the "leaves" instance's already
  std::copy(words_.begin(), words_.end(), leaf.input(words_port_).data);
  leaf.forward();
  const TensorView<const float> leaf_out = leaf.value(leaf_->out);
  std::copy_n(leaf_out.data, leaves * dim_, vectors_.begin());
  level_tapes_.push_back(&leaf);
  std::map<int64_t, size_t> uses;  // compose tapes of each width used so far in this tree
  int64_t row = leaves;
  for (size_t h = 1; h < levels_.size(); ++h) {
    const std::vector<int32_t>& level = levels_[h];
    const auto width = static_cast<int64_t>(level.size());
    Tape<float>& tape = port_tape(*compose_, width, uses[width]++);
    use(tape, hash_name(cat("h", h)));
    // Child port j reads child j of each node, zeros where a node has fewer children.
    for (size_t j = 0; j < compose_->inputs.size(); ++j) {
      float* in = tape.input(compose_->inputs[j]).data;
      for (size_t i = 0; i < level.size(); ++i) {
        const std::span<const int32_t> children = shape_.children(level[i]);
        if (j < children.size()) {
          std::copy_n(vectors_.data() + static_cast<size_t>(row_of_[static_cast<size_t>(children[j])]) * n, n, in + i * n);
        } else {
          std::fill_n(in + i * n, n, 0.0f);
        }
      }
    }
    tape.forward();
    std::copy_n(tape.value(compose_->out).data, width * dim_, vectors_.begin() + row * dim_);
    level_tapes_.push_back(&tape);
    row += width;
  }
  const int64_t nodes = shape_.size();
  Tape<float>& scores = port_tape(*scores_port_, nodes, 0);
  use(scores, hash_name("tree"));
  scores.bind_input(scores_port_->inputs[0], vectors_.data(), vector_grads_.data());
  scores.forward();
  std::copy_n(scores.value(scores_port_->out).data, nodes * classes_, scores_.begin());
  scores_tape_ = &scores;
  if (labels_.empty()) return;
  const auto labeled = static_cast<int64_t>(labels_.size());
  Tape<float>& loss = loss_tape(labeled);
  use(loss, 0);
  float* in = loss.input("scores").data;
  for (size_t i = 0; i < labeled_rows_.size(); ++i) {
    std::copy_n(scores_.begin() + static_cast<int64_t>(labeled_rows_[i]) * classes_, classes_,
                in + static_cast<int64_t>(i) * classes_);
  }
  std::copy(labels_.begin(), labels_.end(), loss.input("labels").data);
  loss.forward();
  objective_ = loss.objective();
  loss_ = &loss;
}

void TreeTape::backward(std::span<const float> score_grads) {
  if (forward_only_) fail("TreeTape: backward() on a forward-only tape (evaluation)");
  if (!loss_ && score_grads.empty()) return;  // no label: no gradient
  if (!scores_tape_) fail("TreeTape: backward() before forward()");
  if (!score_grads.empty() && score_grads.size() != scores_.size()) {
    fail("TreeTape: a gradient of ", score_grads.size(), " values for scores of ", scores_.size());
  }
  for (std::vector<float>& g : shared_grads_) std::fill(g.begin(), g.end(), 0.0f);
  std::fill(vector_grads_.begin(), vector_grads_.end(), 0.0f);
  if (score_grads.empty()) {
    std::fill(score_grads_.begin(), score_grads_.end(), 0.0f);
  } else {
    std::copy(score_grads.begin(), score_grads.end(), score_grads_.begin());
  }
  if (loss_) {
    loss_->backward();
    const float* d = loss_->grad("scores").data;
    for (size_t i = 0; i < labeled_rows_.size(); ++i) {
      float* to = score_grads_.data() + static_cast<int64_t>(labeled_rows_[i]) * classes_;
      for (int64_t k = 0; k < classes_; ++k) to[k] += d[static_cast<int64_t>(i) * classes_ + k];
    }
  }
  scores_tape_->backward_from(scores_port_->out, score_grads_);  // adds into vector_grads_
  const auto n = static_cast<size_t>(dim_);
  int64_t end = shape_.size();
  for (size_t h = levels_.size() - 1; h >= 1; --h) {
    const std::vector<int32_t>& level = levels_[h];
    const auto width = static_cast<int64_t>(level.size());
    const int64_t begin = end - width;
    Tape<float>& tape = *level_tapes_[h];
    tape.backward_from(compose_->out, std::span<const float>(vector_grads_).subspan(static_cast<size_t>(begin * dim_),
                                                                                   static_cast<size_t>(width * dim_)));
    for (size_t j = 0; j < compose_->inputs.size(); ++j) {
      const float* d = tape.grad(compose_->inputs[j]).data;
      for (size_t i = 0; i < level.size(); ++i) {
        const std::span<const int32_t> children = shape_.children(level[i]);
        if (j >= children.size()) continue;  // a zero row: nothing to send it
        float* to = vector_grads_.data() + static_cast<size_t>(row_of_[static_cast<size_t>(children[j])]) * n;
        for (size_t k = 0; k < n; ++k) to[k] += d[i * n + k];
      }
    }
    end = begin;
  }
  add_deferred_weight_gradients();
  level_tapes_[0]->backward_from(leaf_->out, std::span<const float>(vector_grads_).first(static_cast<size_t>(end * dim_)));
  if (!shared_) return;
  std::vector<Tape<float>::Seed> seeds;
  for (size_t k = 0; k < shared_names_.size(); ++k) {
    if (!gradient_into_param_.contains(shared_names_[k])) seeds.push_back({shared_names_[k], shared_grads_[k]});
  }
  if (!seeds.empty()) shared_->backward_from(seeds);
}

void TreeTape::add_deferred_weight_gradients() {
  const int64_t internal = shape_.size() - static_cast<int64_t>(levels_[0].size());
  if (internal == 0) return;
  for (const Port::Deferred& d : compose_->deferred) {
    // The levels' rows one after another: both vector inputs and the output's gradient.
    const Tape<float>& first = *level_tapes_[1];
    const int64_t n = first.info(d.v1).shape[1], m = first.info(d.v2).shape[1];
    const int64_t k = first.info(d.node).shape[1];
    v1_rows_.resize(static_cast<size_t>(internal * n));
    v2_rows_.resize(static_cast<size_t>(internal * m));
    dy_rows_.resize(static_cast<size_t>(internal * k));
    int64_t row = 0;
    for (size_t h = 1; h < levels_.size(); ++h) {
      const Tape<float>& tape = *level_tapes_[h];
      const auto width = static_cast<int64_t>(levels_[h].size());
      std::copy_n(tape.value(d.v1).data, width * n, v1_rows_.begin() + row * n);
      std::copy_n(tape.value(d.v2).data, width * m, v2_rows_.begin() + row * m);
      std::copy_n(tape.grad(d.node).data, width * k, dy_rows_.begin() + row * k);
      row += width;
    }
    float* dt = nullptr;
    const auto into = gradient_into_param_.find(d.weight);
    if (d.param || into != gradient_into_param_.end()) {
      const ParamEntry& e = params_.at(d.param ? d.weight : into->second);
      dt = (grads_.empty() ? params_.grads() : grads_).data() + e.offset;
    } else {
      const auto at = std::find(shared_names_.begin(), shared_names_.end(), d.weight) - shared_names_.begin();
      dt = shared_grads_[static_cast<size_t>(at)].data();
    }
    add_bilinear_weight_gradient({v1_rows_.data(), Shape{internal, n}}, {v2_rows_.data(), Shape{internal, m}},
                                 {dy_rows_.data(), Shape{internal, k}}, {dt, Shape{k, n, m}}, outer_rows_);
  }
}

std::string TreeTape::describe() const {
  std::string out = cat("the objective is ", objective_);
  std::vector<const Tape<float>*> ran;
  if (shared_) ran.push_back(shared_.get());
  ran.insert(ran.end(), level_tapes_.begin(), level_tapes_.end());
  if (scores_tape_) ran.push_back(scores_tape_);
  if (loss_) ran.push_back(loss_);
  for (const Tape<float>* t : ran) {
    if (const std::string node = t->first_non_finite(); !node.empty()) {
      return out + "; the first non-finite value is at " + node;
    }
  }
  return out;
}

}  // namespace pens
