// Pseudo-ensembles (paper sections 2-4): a parent graph whose nodes carry noise
// annotations becomes a combined graph holding K perturbed children that share the
// parent's parameters, the supervised loss on the network the spec names, and PEA
// agreement penalties between partial-noise taps.
//
// Naming. Child k's copy of parent node "h1" is "c<k>/h1": its value is the partial-noise
// tap of h1 (everything below h1 perturbed, h1's own noise not yet applied). The noise a
// child applies to h1 follows as "c<k>/h1~mask", "c<k>/h1~gaussian", ...; the value the
// child's upper layers read is the last of these. Supervised loss heads are
// "loss/parent/..." or "loss/c<k>/..."; penalty terms are "pen/<node>/<kind>" (flagged
// kLoss) with their weight in the constant "pen/<node>/<kind>/lambda". Code that uses a
// pseudo-ensemble does not rebuild these names: the passes return them (PseudoEnsemble).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pens/graph/graph.h"
#include "pens/graph/pass.h"

namespace pens {

// One agreement penalty: V of the given kind between the taps of `node`, weighted by
// lambda, averaged over the rows it applies to.
struct PenaltyTerm {
  std::string node;
  std::string kind;   // a registered penalty kind (graph/penalty.h): kl, xent, tanh, direction, l2, ...
  double lambda = 1.0;
  std::string rows = "all";  // all | labeled | unlabeled
  // The first side of each pair (the parent in parent-child pairs, the lower-numbered
  // child in child-child pairs) is a fixed target: the term's gradient does not flow into
  // it (stop_gradient), so only the other side moves to agree, and the kind is not
  // symmetrised. The Π-model's and mean teacher's consistency terms are so.
  bool fixed_target = false;
  // Values of the kind's parameters (PenaltyKind::params); the rest keep their defaults.
  std::map<std::string, double> params = {};
  // Whether the λ stages (lambda_schedule) scale this term; false: its λ holds throughout,
  // as for a regulariser that the stages are not about (the authors' activation L2).
  bool scheduled = true;
  // Non-empty (pairing parent-child only): the first side of each pair is the parent's
  // node of this name instead of `node`'s, so that a child's reconstruction of an activity
  // is compared with the clean activity itself: a ladder network's denoising costs, where
  // `node` is the decoder's estimate and `target` the clean encoder's value. The two must
  // have the same width.
  std::string target = {};
  // Non-empty: this term's pairing (child-child or parent-child) in place of the spec's,
  // so that one pseudo-ensemble holds terms of both: a ladder network's denoising costs
  // against the clean parent beside PEA's agreement between its corrupted children.
  std::string pairing = {};
  // Non-empty: the children (1..K) this term taps, in place of all of them, so that
  // children of different kinds (noise annotations' own `children`) each meet their own
  // terms: a ladder's denoising costs on its Gaussian child, VAT's KL on its adversarial one.
  std::vector<int64_t> children = {};
  bool operator==(const PenaltyTerm&) const = default;
};

// A stage of the lambda schedule: every scheduled penalty's lambda is multiplied by `scale` for
// `epochs` epochs; the last stage holds to the end of training (train/optim/schedule.h).
struct LambdaStage {
  double epochs = 0;
  double scale = 1;
  bool operator==(const LambdaStage&) const = default;
};

struct PseudoEnsembleSpec {
  int64_t children = 2;
  std::string pairing = "child-child";  // child-child (the paper's experiments) | parent-child; a term may override it
  std::string loss_on = "parent";       // parent (eq. 3) | child (child 1, eq. 1) | children (mean)
  double smoothing = 1e-4;              // softmax smoothing before kl / xent; 0: none
  // 1: child 1 is a teacher: its network reads, for each parameter with a moving average
  // (graph/graph.h), the average in its place (a mean teacher: Tarvainen & Valpola
  // 2017). It keeps its own noise; with child-child pairing and fixed_target penalties
  // it is the target the other children move toward. 0: no teacher.
  int64_t teacher = 0;
  // Where children take batch statistics from (the computed sources of moving averages:
  // batch normalisation's mean and variance): "own", each child's own perturbed batch;
  // "parent", the clean parent's, held constant, so that a child's noise changes each
  // example's value and not the normalisation of the whole batch. One entry: every
  // child's; K entries: child k's at [k - 1].
  std::vector<std::string> batch_statistics = {"own"};
  // true: the labeled and the unlabeled rows of a batch are normalised each with their own
  // batch statistics (SplitStatistics, graph/pass.h), in the parent and in every child;
  // the running statistics follow the labeled rows'. false: one set over the whole batch.
  bool statistics_by_part = false;
  std::vector<PenaltyTerm> penalties;
  std::vector<LambdaStage> lambda_schedule;

  // Throws an Error naming the field that is wrong.
  void validate() const;
  // The pairing a term's pairs follow: its own, or the spec's.
  const std::string& pairing_of(const PenaltyTerm& term) const {
    return term.pairing.empty() ? pairing : term.pairing;
  }
  // Where child k (1..K) takes its batch statistics from.
  const std::string& batch_statistics_of(int64_t k) const {
    return batch_statistics.size() == 1 ? batch_statistics[0] : batch_statistics.at(static_cast<size_t>(k - 1));
  }
  // The children (1..K) a term taps: its own list, or every child.
  std::vector<int64_t> children_of(const PenaltyTerm& term) const;
  // Whether a penalty covers only labeled or only unlabeled rows, so that a batch built
  // for it must say where its labeled rows end (EnsembleOptions::labeled_rows).
  bool splits_rows() const;
  bool operator==(const PseudoEnsembleSpec&) const = default;
};

// What a pseudo-ensemble is built for, beyond the model itself.
struct EnsembleOptions {
  int64_t labeled_rows = -1;  // batch rows [0, L) carry labels, [L, B) do not; -1: all do
  // Compute each child on the rows its loss and penalties read (RestrictRows,
  // graph/pass.h); false computes every child on the whole batch (the same values).
  bool restrict_rows = true;
};

// What the perturb pass made: the graph (the parent's leaves and network, K children, the
// supervised loss heads) and where things are in it.
struct Perturbed {
  Graph graph;
  // taps[k - 1]: parent node -> child k's copy of it, its partial-noise tap, for every
  // node of the parent's network.
  std::vector<std::map<std::string, std::string>> taps;
  std::vector<std::string> losses;  // the supervised loss terms, flagged kLoss
  // Each node of the parent's loss head -> its copy on the (first) network carrying the
  // loss: "recon_error" -> "loss/c1/recon_error".
  std::map<std::string, std::string> loss_head;
};

// One penalty term as built: its taps, the node of its value and the node of its weight.
struct PenaltyHandle {
  PenaltyTerm term;
  std::string layer;                    // the tapped node's layer
  std::string pairing;                  // child-child or parent-child: the spec's, or the term's own
  std::string parent;                   // the clean parent's node it pairs with, "" for child-child pairs
  std::vector<std::string> children;    // the children's taps
  std::string value;                    // λ · mean over rows of V: a loss node
  std::string lambda;                   // λ: a constant, so Tape::set_constant follows a schedule
};

// A training graph and what code driving it needs to know about it.
struct PseudoEnsemble {
  Graph graph;  // verified, dead nodes pruned
  PseudoEnsembleSpec spec = {};
  std::vector<std::string> losses = {};  // the supervised loss terms
  std::map<std::string, std::string> loss_head = {};
  std::vector<PenaltyHandle> penalties = {};
};

// Adds K children (spec.children) of the parent's network (the non-leaf ancestors of
// its output nodes and of the nodes its penalties tap, so that a decoder no output reads
// is still computed by each child) and the supervised loss on the network spec.loss_on names. The
// parent's nodes stay as they are; children point at its inputs and parameters.
class PerturbPass : public Pass {
 public:
  PerturbPass(PseudoEnsembleSpec spec, EnsembleOptions options) : spec_(std::move(spec)), options_(options) {}
  std::string_view name() const override { return "perturb"; }
  Graph run(const Graph& parent) const override { return perturb(parent).graph; }
  Perturbed perturb(const Graph& parent) const;

 private:
  PseudoEnsembleSpec spec_;
  EnsembleOptions options_;
};

// Adds the agreement penalties of spec.penalties between the taps `perturbed` records,
// each built by its kind from the penalty registry; returns their handles.
std::vector<PenaltyHandle> add_penalties(Perturbed& perturbed, const PseudoEnsembleSpec& spec,
                                         const EnsembleOptions& options);

// Gives each probe node of `perturbed` its body (graph/graph.h, ProbeBody): the clean
// parent's output (`outputs`: the parent's one output node) and the probed child's, the
// probe replaced by an input of its name, and the sum over rows of the divergence its
// kind names between them as the objective.
void add_probe_bodies(Perturbed& perturbed, const std::vector<std::string>& outputs, double smoothing,
                      int64_t batch);

// The training graph: perturb, penalties, probe bodies, then dead nodes pruned (the clean parent
// network disappears when neither the loss nor a penalty reads it). Verified.
PseudoEnsemble build_pseudo_ensemble(const Graph& parent, const PseudoEnsembleSpec& spec,
                                     const EnsembleOptions& options = {});

// Children 1..K of a graph that has no loss (a tree cell, graph/tree.h), built once so
// that unrolling it gives each tree perturbed networks without perturbing each tree's
// graph: *out receives the parent and the children; returns, for child k at [k - 1] and
// each of `ports` (parent nodes), the name of the child's value of it, after that node's
// own noise. Noise found from gradients (adversarial) needs an objective and is refused.
std::vector<std::vector<std::string>> perturb_cell(const Graph& cell, const std::vector<std::string>& ports, Graph* out,
                                                   int64_t children = 1);

// Inference graphs. samples = 0: the parent's network alone, noise ignored. samples = K:
// K sampled children and, per output node "out", "mc/out" = the mean over the children
// of softmax(out) (Monte-Carlo averaging, as for subspace sampling at test time); what
// the children draw depends on the tape's noise key. Noise found from gradients of a
// training objective (adversarial) is not sampled. Moving averages marked at_inference
// are read in place of their sources (batch normalisation's running statistics).
Graph build_inference(const Graph& parent, int64_t samples = 0);

// The graph that measures a model's batch statistics as inference meets them: the parent,
// noise ignored, with each at_inference moving average of a parameter (a teacher's
// weights) read in place of the parameter; its outputs are the sources of the
// at_inference moving averages of batch statistics (bn1/mean, bn1/var, ...). Running it
// over batches of training data and averaging (StatisticsRecalibration,
// train/tasks/evaluation.h) replaces running statistics with the population's under the
// weights inference reads. Throws when the model has no such average.
Graph build_statistics(const Graph& model);

}  // namespace pens
