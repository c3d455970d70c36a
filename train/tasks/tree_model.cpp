#include "pens/train/tasks/tree_model.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>
#include <string>

#include "pens/graph/infer.h"
#include "pens/graph/noise.h"
#include "pens/graph/pass.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"
#include "pens/ops/registry.h"
#include "pens/train/optim/schedule.h"

namespace pens {

double TreeEvaluation::root_accuracy() const {
  return roots > 0 ? static_cast<double>(roots_right) / static_cast<double>(roots) : std::nan("");
}

double TreeEvaluation::node_accuracy() const {
  return nodes > 0 ? static_cast<double>(nodes_right) / static_cast<double>(nodes) : std::nan("");
}

SentimentTask task_of(const Model& model) {
  if (!model.tree) fail("the model has no tree section: it is not a network over trees (pens new ctn writes one)");
  const int64_t classes = verify(model.graph)[model.graph.at(model.tree->scores)].shape[1];
  return classes == 2 ? SentimentTask::Binary : SentimentTask::Fine;
}

TreeModel::TreeModel(const Model& model, SentimentTask task, double loss_scale)
    : model_(model), task_(task), loss_scale_(loss_scale) {
  if (!model.tree) fail("the model has no tree section: it is not a network over trees (pens new ctn writes one)");
  const Graph& cell = model.graph;
  bool needs_objective = false;  // some noise is found from gradients (adversarial)
  for (NodeId v : cell.nodes()) {
    for (const NoiseAnnotation& a : cell[v].noise) {
      subspace_ = subspace_ || a.kind == "subspace";
      per_tree_parameters_ = per_tree_parameters_ || is_param(cell[v]);
      needs_objective = needs_objective || NoiseRegistry::global().at(a.kind).probe != nullptr;
    }
  }
  const std::vector<ValueInfo> info = verify(cell);
  classes_ = info[cell.at(model.tree->scores)].shape[1];
  // A step moves the averages from the store (TreeStepGraphs::update_averages).
  for (const MovingAverage& a : cell.averages()) {
    if (!is_param(cell[cell.at(a.source)])) {
      fail("moving average '", a.param, "' follows '", a.source,
           "', a computed value: a tree model keeps moving averages of parameters only");
    }
  }
  const NodeId words = cell.at(model.tree->words);
  for (NodeId v : cell.nodes()) {
    if (!is_param(cell[v])) continue;
    const std::vector<NodeId> readers = cell.consumers(v);
    const bool looked_up = !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](NodeId r) {
      const Node& n = cell[r];
      const std::vector<NodeId> in = cell.inputs(r);
      const bool rows = n.op->name == "embedding" ||
                        (n.op->name == "gather" && (!n.attrs.has("axis") || n.attrs.get_int("axis") == 0));
      return rows && in.size() == 2 && in[0] == v && in[1] == words;
    });
    if (looked_up) word_tables_.push_back(cell[v].name);
  }
  if (classes_ != task_classes(task)) {
    fail("the model scores ", classes_, " classes but the ", task_name(task), " task has ", task_classes(task));
  }
  // A pseudo-ensemble of one noisy child trained alone, without penalties: the same
  // child for every tree, so the cell is perturbed once here and each tree unrolls the
  // child (graph/tree.h shares what the parameters' noise computes, so it is drawn once
  // per tree). Penalties pair taps of a tree's own graph, and noise found from gradients
  // needs the tree's objective: those perturb each tree's graph (training_tree).
  const std::optional<PseudoEnsembleSpec>& spec = model.ensemble;
  const TreePorts& p = *model.tree;
  const auto child_ports = [&](const std::vector<std::string>& child) {
    TreePorts c = p;
    c.leaf = child[0], c.compose = child[1], c.scores = child[2];
    return c;
  };
  // Penalties between the networks' scores (the paper's PEA on every node of a tree)
  // need a tree's networks side by side, not its graph: they run on TreeTapes of the cell
  // perturbed into all its children, tied by a head over their scores (tree_ensemble.h).
  const bool cell_perturbed = spec && spec->teacher == 0 && !needs_objective;
  const bool penalties_on_scores =
      cell_perturbed && cell[cell.at(p.scores)].noise.empty() &&
      std::all_of(spec->penalties.begin(), spec->penalties.end(),
                  [&](const PenaltyTerm& t) { return t.node == p.scores && t.target.empty(); });
  if (cell_perturbed && spec->penalties.empty() && spec->loss_on == "child") {
    training_ports_ = child_ports(perturb_cell(cell, {p.leaf, p.compose, p.scores}, &training_cell_.emplace())[0]);
  } else if (cell_perturbed && penalties_on_scores) {
    for (const std::vector<std::string>& child :
         perturb_cell(cell, {p.leaf, p.compose, p.scores}, &ensemble_cell_.emplace(), spec->children)) {
      ensemble_ports_.push_back(child_ports(child));
    }
  }
  // The clean parent at test time: noise ignored, moving averages marked at_inference
  // read in place of their sources. The ports are its outputs, so that what only they
  // read is kept; they keep the cell's names.
  Graph ports_out = cell;
  for (NodeId v : ports_out.nodes()) ports_out.node(v).flags &= ~static_cast<uint32_t>(kOutput | kLoss);
  for (const std::string& port : {p.leaf, p.compose, p.scores}) ports_out.set_flag(ports_out.at(port), kOutput);
  inference_cell_ = build_inference(ports_out);
  // The test-time ensemble is over subspaces alone: the paper averages 50 sampled
  // subspaces and does not fuzz at test time; activation noise is a training noise too.
  if (subspace_) {
    Graph subspaces = cell;
    for (NodeId v : subspaces.nodes()) {
      std::vector<NoiseAnnotation>& noise = subspaces.node(v).noise;
      std::erase_if(noise, [](const NoiseAnnotation& a) { return a.kind != "subspace"; });
    }
    sampling_ports_ = child_ports(perturb_cell(subspaces, {p.leaf, p.compose, p.scores}, &sampling_cell_.emplace())[0]);
  }
}

// The TreeTapes of TreeModel's evaluations over one parameter store: a piece of work
// leases one (made when none is free) and gives it back when done, so that each thread's
// tapes are compiled once per level width and kept for the next call: a run evaluates the
// same sets every epoch.
class TreeModel::TapePool {
 public:
  TapePool(const ParamStore<float>& params, std::function<std::unique_ptr<TreeTape>()> make)
      : params_(&params), values_(params.values().data()), make_(std::move(make)) {}
  // Whether the tapes read this store (the same object, its values where they were).
  bool reads(const ParamStore<float>& params) const {
    return params_ == &params && values_ == params.values().data();
  }
  class Lease {
   public:
    Lease(TapePool& pool, std::unique_ptr<TreeTape> tape) : pool_(pool), tape_(std::move(tape)) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      const std::lock_guard<std::mutex> lock(pool_.mutex_);
      pool_.free_.push_back(std::move(tape_));
    }
    TreeTape& operator*() const { return *tape_; }

   private:
    TapePool& pool_;
    std::unique_ptr<TreeTape> tape_;
  };
  Lease lease() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        std::unique_ptr<TreeTape> tape = std::move(free_.back());
        free_.pop_back();
        return {*this, std::move(tape)};
      }
    }
    return {*this, make_()};
  }

 private:
  const ParamStore<float>* params_;
  const float* values_;
  std::function<std::unique_ptr<TreeTape>()> make_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<TreeTape>> free_;
};

std::shared_ptr<TreeModel::TapePool> TreeModel::tapes(std::shared_ptr<TapePool>& pool, ParamStore<float>& params,
                                                      std::unique_ptr<TreeTape> (TreeModel::*make)(ParamStore<float>&)
                                                          const) const {
  const std::lock_guard<std::mutex> lock(pools_mutex_);
  if (!pool || !pool->reads(params)) {
    pool = std::make_shared<TapePool>(params, [this, &params, make] { return (this->*make)(params); });
  }
  return pool;  // an evaluation on another store may replace it while this one runs
}

TreeLoss TreeModel::loss_of(const SentimentTree& tree) const {
  TreeLoss loss{.labeled = {}, .scale = loss_scale_};
  for (int64_t i = 0; i < tree.size(); ++i) {
    if (task_label(task_, tree.label[static_cast<size_t>(i)]) >= 0) loss.labeled.push_back(static_cast<int32_t>(i));
  }
  return loss;
}

UnrolledTree TreeModel::unroll(const SentimentTree& tree) const {
  return unroll_tree(model_.graph, *model_.tree, tree.shape, loss_of(tree));
}

namespace {
// The passes build_pseudo_ensemble ends with that apply to one child: word vectors looked
// up before their noise, then the table-sized noise left unread removed. unroll_tree
// verified the graph; the rewrite is verified once, at the end.
Graph rows_looked_up_first(const Graph& unrolled) {
  return within_pass("lookup-first, prune-dead-nodes", [&] {
    Graph g = PruneDeadNodes().run(LookupFirst().run(unrolled));
    verify(g);
    return g;
  });
}
}  // namespace

UnrolledTree TreeModel::sampling_tree(const SentimentTree& tree) const {
  UnrolledTree t = unroll_tree(*sampling_cell_, sampling_ports_, tree.shape);
  const NodeId scores = t.graph.at(t.scores);
  const NodeId probabilities = t.graph.add("softmax", {scores}, {}, "tree/probabilities");
  t.graph.node(scores).flags &= ~static_cast<uint32_t>(kOutput);
  t.graph.set_flag(probabilities, kOutput);
  t.scores = "tree/probabilities";
  t.graph = rows_looked_up_first(t.graph);
  return t;
}

UnrolledTree TreeModel::training_tree(const SentimentTree& tree) const {
  if (training_cell_) {
    UnrolledTree t = unroll_tree(*training_cell_, training_ports_, tree.shape, loss_of(tree));
    t.graph = rows_looked_up_first(t.graph);
    return t;
  }
  UnrolledTree t = unroll(tree);
  if (!model_.ensemble) return t;
  // Penalties name cell nodes; on a tree they apply to the nodes' instance over every
  // node of the tree ("scores" -> "scores@tree").
  PseudoEnsembleSpec spec = *model_.ensemble;
  for (PenaltyTerm& p : spec.penalties) {
    const std::string instance = p.node + "@tree";
    if (!t.graph.find(instance)) {
      fail("pseudo_ensemble penalty on '", p.node, "': on trees, penalties apply to the scores port's nodes");
    }
    p.node = instance;
  }
  PseudoEnsemble ensemble = build_pseudo_ensemble(t.graph, spec);
  t.graph = std::move(ensemble.graph);
  t.penalties = std::move(ensemble.penalties);
  return t;
}

std::unique_ptr<TreeEnsembleTape> TreeModel::ensemble_tape(ParamStore<float>& params) const {
  if (!ensemble_cell_) fail("the model's penalties do not run on TreeTapes: it has no TreeEnsembleTape");
  return std::make_unique<TreeEnsembleTape>(*ensemble_cell_, *model_.tree, ensemble_ports_, *model_.ensemble, params,
                                            loss_scale_);
}

std::unique_ptr<TreeTape> TreeModel::tree_tape(ParamStore<float>& params) const {
  if (!runs_tree_tapes() || ensemble_cell_) fail("the model's pseudo-ensemble needs a graph per tree: it has no TreeTape");
  if (training_cell_) {
    return std::make_unique<TreeTape>(*training_cell_, training_ports_, params, loss_scale_, false, precision_);
  }
  return std::make_unique<TreeTape>(model_.graph, *model_.tree, params, loss_scale_, false, precision_);
}

void TreeModel::labels_of(const SentimentTree& tree, std::vector<int32_t>& labels, bool labeled) const {
  labels.resize(tree.label.size());
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = labeled ? task_label(task_, tree.label[i]) : -1;
  for (int64_t i = 0; i < tree.size(); ++i) {
    if (tree.is_leaf(i) && tree.word_id[static_cast<size_t>(i)] < 0) {
      fail("tree at line ", tree.line, ": words have no vocabulary ids (Vocabulary::assign_ids)");
    }
  }
}

void TreeModel::feed(Tape<float>& tape, const UnrolledTree& unrolled, const SentimentTree& tree, bool labels) const {
  TensorView<float> words = tape.input(unrolled.words);
  for (size_t i = 0; i < unrolled.leaves.size(); ++i) {
    const int32_t id = tree.word_id[static_cast<size_t>(unrolled.leaves[i])];
    if (id < 0) fail("tree at line ", tree.line, ": words have no vocabulary ids (Vocabulary::assign_ids)");
    words[static_cast<int64_t>(i)] = static_cast<float>(id);
  }
  if (labels && !unrolled.loss.empty()) {
    TensorView<float> in = tape.input(unrolled.labels);
    for (size_t i = 0; i < unrolled.labeled.size(); ++i) {
      in[static_cast<int64_t>(i)] =
          static_cast<float>(task_label(task_, tree.label[static_cast<size_t>(unrolled.labeled[i])]));
    }
    if (!unrolled.label_rows.first.empty()) {
      const std::vector<float>& rows = unrolled.label_rows.second;
      std::copy(rows.begin(), rows.end(), tape.input(unrolled.label_rows.first).data);
    }
  }
  for (const auto& [name, values] : unrolled.indices) {
    TensorView<float> in = tape.input(name);
    std::copy(values.begin(), values.end(), in.data);
  }
}

namespace {
// An evaluation in `chunks` pieces side by side on the pool's threads:
// count(chunk, tally) counts a piece into a tally of its own (a copy of `e`, empty); the
// tallies are then added into `e` (counts add up the same in any order), or the first
// piece's error is thrown.
template <class Count>
void count_in_chunks(size_t chunks, TreeEvaluation& e, const Count& count) {
  std::vector<TreeEvaluation> tallies(chunks, e);
  std::vector<std::string> errors(chunks);
  parallel_for(static_cast<int64_t>(chunks), [&](int64_t c) {
    try {
      count(static_cast<size_t>(c), tallies[static_cast<size_t>(c)]);
    } catch (const Error& error) {
      errors[static_cast<size_t>(c)] = error.what();
    }
  });
  for (const std::string& error : errors) {
    if (!error.empty()) throw Error(error);
  }
  for (const TreeEvaluation& t : tallies) {
    e.roots += t.roots, e.roots_right += t.roots_right, e.nodes += t.nodes, e.nodes_right += t.nodes_right;
    for (size_t i = 0; i < e.confusion.size(); ++i) {
      for (size_t j = 0; j < e.confusion.size(); ++j) e.confusion[i][j] += t.confusion[i][j];
    }
  }
}
}  // namespace

void TreeModel::tally(const SentimentTree& tree, std::span<const double> scores, bool probabilities,
                      bool fold_to_binary, TreeEvaluation& e) const {
  const SentimentTask task = fold_to_binary ? SentimentTask::Binary : task_;
  for (int64_t i = 0; i < tree.size(); ++i) {
    const int32_t label = task_label(task, tree.label[static_cast<size_t>(i)]);
    if (label < 0) continue;
    const auto begin = scores.begin() + i * classes_;
    auto predicted = static_cast<int32_t>(std::max_element(begin, begin + classes_) - begin);
    if (fold_to_binary) {
      // Positive when classes 3 and 4 are likelier than 0 and 1 together (the parent's
      // scores through a softmax first; the shared factor of its sum cancels).
      const double top = begin[predicted];
      const auto p = [&](int k) { return probabilities ? begin[k] : std::exp(begin[k] - top); };
      predicted = p(3) + p(4) > p(0) + p(1) ? 1 : 0;
    }
    ++e.nodes;
    e.nodes_right += predicted == label;
    if (i == tree.root()) {
      ++e.roots;
      e.roots_right += predicted == label;
      ++e.confusion[static_cast<size_t>(label)][static_cast<size_t>(predicted)];
    }
  }
}

void TreeModel::evaluate_forest(TreeTape& tape, const std::vector<const SentimentTree*>& members,
                                bool fold_to_binary, TreeEvaluation& e) const {
  const Forest f = make_forest(members);
  std::vector<int32_t> labels;
  set_tree_of(tape, f.nodes, labels, /*labeled=*/false);
  tape.forward();
  const std::span<const float> v = tape.scores();
  std::vector<double> scores;
  for (size_t t = 0; t < members.size(); ++t) {
    const SentimentTree& tree = *members[t];
    scores.resize(static_cast<size_t>(tree.size() * classes_));
    for (int64_t i = 0; i < tree.size(); ++i) {
      const int64_t r = tape.row_of()[static_cast<size_t>(f.offsets[t] + i)];
      std::copy_n(v.begin() + r * classes_, classes_, scores.begin() + i * classes_);
    }
    tally(tree, scores, false, fold_to_binary, e);
  }
}

std::unique_ptr<TreeTape> TreeModel::inference_tape(ParamStore<float>& params) const {
  return std::make_unique<TreeTape>(inference_cell_, *model_.tree, params, 1.0, /*forward_only=*/true, precision_);
}

std::unique_ptr<TreeTape> TreeModel::sampling_tape(ParamStore<float>& params) const {
  if (!sampling_cell_) fail("the model samples no subspaces: it has no sampling cell");
  return std::make_unique<TreeTape>(*sampling_cell_, sampling_ports_, params, 1.0, /*forward_only=*/true, precision_);
}

void TreeModel::sampled_probabilities(TreeTape& tape, const SentimentTree& tree, int64_t samples, uint64_t seed,
                                      uint64_t example, std::vector<double>& probs) const {
  std::vector<int32_t> labels;
  set_tree_of(tape, tree, labels, /*labeled=*/false);
  const int64_t nodes = tree.size();
  probs.assign(static_cast<size_t>(nodes * classes_), 0.0);
  // The softmax op's own kernel, as the sampled graph runs it: the same probabilities.
  const OpDef& softmax = OpRegistry::global().at("softmax");
  const std::string name = "tree/probabilities";
  std::vector<float> p(static_cast<size_t>(nodes * classes_));
  const TensorView<const float> scores{tape.scores().data(), Shape{nodes, classes_}};
  KernelArgs<float> args;
  args.in = {&scores, 1};
  args.out = {p.data(), Shape{nodes, classes_}};
  args.node_name = &name;
  for (int64_t draw = 0; draw < samples; ++draw) {
    tape.set_noise_key({.seed = seed, .step = static_cast<uint64_t>(draw), .example = example});
    tape.forward();
    softmax.f32.forward(args);
    for (int64_t i = 0; i < nodes; ++i) {
      const int64_t row = tape.row_of()[static_cast<size_t>(i)];
      for (int64_t k = 0; k < classes_; ++k) {
        probs[static_cast<size_t>(i * classes_ + k)] += p[static_cast<size_t>(row * classes_ + k)];
      }
    }
  }
}

void TreeModel::evaluate_sampled(ParamStore<float>& params, std::span<const SentimentTree> trees, int64_t samples,
                                 uint64_t seed, bool fold_to_binary, size_t first_key, TreeEvaluation& e) const {
  // Runs of consecutive trees, each on a TreeTape leased from the model's pool.
  constexpr size_t kRun = 16;
  const std::shared_ptr<TapePool> pool = tapes(sampling_tapes_, params, &TreeModel::sampling_tape);
  count_in_chunks((trees.size() + kRun - 1) / kRun, e, [&](size_t c, TreeEvaluation& tally) {
    TapePool::Lease tape = pool->lease();
    std::vector<double> probs;
    for (size_t i = c * kRun; i < std::min(trees.size(), (c + 1) * kRun); ++i) {
      sampled_probabilities(*tape, trees[i], samples, seed, first_key + i + 1, probs);
      this->tally(trees[i], probs, true, fold_to_binary, tally);
    }
  });
}

TreeEvaluation TreeModel::evaluate(ParamStore<float>& params, std::span<const SentimentTree> trees, int64_t samples,
                                   uint64_t seed, size_t forest, bool fold_to_binary, size_t first_key) const {
  if (fold_to_binary && classes_ != task_classes(SentimentTask::Fine)) {
    fail("only a fine-grained model (5 classes) folds its predictions to the binary task; this one scores ", classes_);
  }
  const SentimentTask task = fold_to_binary ? SentimentTask::Binary : task_;
  const int64_t evaluated = task_classes(task);
  TreeEvaluation e;
  e.confusion.assign(static_cast<size_t>(evaluated), std::vector<int64_t>(static_cast<size_t>(evaluated), 0));
  if (subspace_ && samples > 0) {
    evaluate_sampled(params, trees, samples, seed, fold_to_binary, first_key, e);
    return e;
  }
  // The clean parent runs on forests, side by side on the pool's threads, each on a
  // TreeTape of the inference cell leased from the model's pool: its port tapes are
  // compiled once per level width, not once per forest.
  const size_t chunk = std::max<size_t>(1, forest);
  const std::shared_ptr<TapePool> pool = tapes(inference_tapes_, params, &TreeModel::inference_tape);
  count_in_chunks((trees.size() + chunk - 1) / chunk, e, [&](size_t c, TreeEvaluation& tally) {
    std::vector<const SentimentTree*> members;
    for (size_t i = c * chunk; i < std::min(trees.size(), (c + 1) * chunk); ++i) members.push_back(&trees[i]);
    TapePool::Lease tape = pool->lease();
    evaluate_forest(*tape, members, fold_to_binary, tally);
  });
  return e;
}

void TreeStepGraphs::assign(const TreeModel& model, ParamStore<float>& params,
                            const std::vector<const SentimentTree*>& trees, const std::vector<uint64_t>& examples,
                            double lambda_scale, size_t groups) {
  if (groups == 0) fail("a tree step needs at least one group");
  model_ = &model, params_ = &params;
  trees_ = trees, examples_ = examples;
  lambda_scale_ = lambda_scale;
  // Cuts where the running node count passes k / groups of the total: groups of about
  // equal work, each a run of consecutive trees, none empty.
  int64_t total = 0;
  for (const SentimentTree* t : trees) total += t->size();
  const size_t count = std::min(groups, trees.size());
  groups_.resize(count);
  size_t next = 0;
  int64_t done = 0;
  for (size_t g = 0; g < count; ++g) {
    Group& group = groups_[g];
    group.first = next;
    const int64_t target = total * static_cast<int64_t>(g + 1) / static_cast<int64_t>(count);
    const size_t last = trees.size() - (count - g - 1);  // leave a tree for each group after
    do done += trees[next++]->size();
    while (next < last && done + trees[next]->size() / 2 <= target);
    group.count = next - group.first;
  }
}

std::span<const Step::SparseRows> TreeStepGraphs::prepare(size_t g) {
  Group& group = groups_.at(g);
  group.forests.clear(), group.unrolled.clear(), group.tapes.clear(), group.examples.clear();
  group.words.clear(), group.sparse.clear();
  const size_t end = group.first + group.count;
  if (model_->runs_tree_ensembles()) {
    if (!group.ensemble) group.ensemble = model_->ensemble_tape(*params_);
    group.ensemble->set_lambda_scale(lambda_scale_);
  } else if (model_->runs_tree_tapes() && !group.trees) {
    group.trees = model_->tree_tape(*params_);
  }
  if (model_->runs_tree_tapes()) {
    if (!model_->per_tree_parameters()) {
      group.forests.push_back(make_forest({trees_.begin() + static_cast<long>(group.first),
                                           trees_.begin() + static_cast<long>(end)}));
      group.examples.push_back(examples_[end - 1]);
    }
  } else {
    std::vector<const SentimentTree*> members;
    for (size_t i = group.first; i < end; ++i) {
      members.push_back(trees_[i]);
      if (!model_->per_tree_parameters() && i + 1 < end) continue;
      group.forests.push_back(make_forest(members));
      group.unrolled.push_back(model_->training_tree(group.forests.back().nodes));
      group.tapes.push_back(std::make_unique<Tape<float>>(group.unrolled.back().graph, *params_));
      set_penalty_weights(*group.tapes.back(), group.unrolled.back().penalties, lambda_scale_);
      group.examples.push_back(examples_[i]);
      members.clear();
    }
  }
  for (size_t i = group.first; i < end; ++i) {
    const SentimentTree& tree = *trees_[i];
    for (int64_t k = 0; k < tree.size(); ++k) {
      if (tree.is_leaf(k)) group.words.push_back(tree.word_id[static_cast<size_t>(k)]);
    }
  }
  std::sort(group.words.begin(), group.words.end());
  group.words.erase(std::unique(group.words.begin(), group.words.end()), group.words.end());
  for (const std::string& table : model_->word_tables()) group.sparse.push_back({&params_->at(table), group.words});
  return group.sparse;
}

// A group on TreeTapes runs its trees one by one, or their forest (forests not empty).
size_t TreeStepGraphs::graphs(size_t g) const {
  const Group& group = groups_.at(g);
  return on_tree_tapes(group) && group.forests.empty() ? group.count : group.examples.size();
}

uint64_t TreeStepGraphs::example(size_t g, size_t i) const {
  const Group& group = groups_.at(g);
  return on_tree_tapes(group) && group.forests.empty() ? examples_.at(group.first + i) : group.examples.at(i);
}

double TreeStepGraphs::forward(size_t g, size_t i, NoiseKey key, std::span<float> grads) {
  Group& group = groups_.at(g);
  // A TreeTape or a TreeEnsembleTape: the same calls.
  const auto on_tapes = [&](auto& t) {
    t.add_param_gradients_to(grads);
    model_->set_tree_of(t, group.forests.empty() ? *trees_.at(group.first + i) : group.forests.at(i).nodes,
                        group.labels);
    t.set_noise_key(key);
    t.forward();
    return t.objective();
  };
  if (group.ensemble) return on_tapes(*group.ensemble);
  if (group.trees) return on_tapes(*group.trees);
  Tape<float>& tape = *group.tapes.at(i);
  tape.add_param_gradients_to(grads);
  model_->feed(tape, group.unrolled.at(i), group.forests.at(i).nodes);
  tape.set_noise_key(key);
  tape.forward();
  return tape.objective();
}

void TreeStepGraphs::backward(size_t g, size_t i) {
  Group& group = groups_.at(g);
  if (group.ensemble) {
    group.ensemble->backward();
  } else if (group.trees) {
    group.trees->backward();
  } else {
    group.tapes.at(i)->backward();
  }
}

std::string TreeStepGraphs::describe(size_t g, size_t i) const {
  const Group& group = groups_.at(g);
  if (group.ensemble) return group.ensemble->describe();
  return group.trees ? group.trees->describe() : describe_objective(*group.tapes.at(i));
}

// Once per step, from the store: a step's trees run on TreeTapes, which keep no
// averages, or on a graph each, whose tapes would each move them once.
void TreeStepGraphs::update_averages() { params_->update_averages(model_->cell()); }

}  // namespace pens
