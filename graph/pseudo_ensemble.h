// Pseudo-ensembles (paper sections 2-4): a parent graph whose nodes carry noise
// annotations becomes a combined graph holding K perturbed children that share the
// parent's parameters, the supervised loss on the network the spec names, and PEA
// agreement penalties between partial-noise taps.
//
// Naming. Child k's copy of parent node "h1" is "c<k>/h1": its value is the partial-noise
// tap of h1 (everything below h1 perturbed, h1's own noise not yet applied). The noise a
// child applies to h1 follows as "c<k>/h1~mask", "c<k>/h1~gaussian", ...; the value the
// child's upper layers read is the last of these. Supervised loss heads are
// "loss/parent/..." or "loss/c<k>/..."; penalty terms are "pen/<node>" (flagged kLoss) with
// their weight in the constant "pen/<node>/lambda".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/pass.h"

namespace pens {

// One agreement penalty: V of the given kind between the taps of `node`, weighted by
// lambda, averaged over the rows it applies to.
struct PenaltyTerm {
  std::string node;
  std::string kind;   // kl (V^k) | xent (V^x) | tanh (V^t) | direction (V^c) | l2
  double lambda = 1.0;
  std::string rows = "all";  // all | labeled | unlabeled
  bool operator==(const PenaltyTerm&) const = default;
};

// A stage of the lambda schedule: every penalty's lambda is multiplied by `scale` for
// `epochs` epochs; the last stage holds to the end of training.
struct LambdaStage {
  double epochs = 0;
  double scale = 1;
  bool operator==(const LambdaStage&) const = default;
};

struct PseudoEnsembleSpec {
  int64_t children = 2;
  std::string pairing = "child-child";  // child-child (the paper's experiments) | parent-child
  std::string loss_on = "parent";       // parent (eq. 3) | child (child 1, eq. 1) | children (mean)
  double smoothing = 1e-4;              // softmax smoothing before kl / xent; 0: none
  std::vector<PenaltyTerm> penalties;
  std::vector<LambdaStage> lambda_schedule;

  // Throws an Error naming the field that is wrong.
  void validate() const;
  // The schedule's multiplier at a (fractional) epoch; 1 without a schedule.
  double lambda_scale(double epoch) const;
  bool operator==(const PseudoEnsembleSpec&) const = default;
};

inline const std::vector<std::string> kPenaltyKinds = {"kl", "xent", "tanh", "direction", "l2"};

// What a pseudo-ensemble is built for, beyond the model itself.
struct EnsembleOptions {
  uint64_t seed = 0;          // fixes every noise stream of the children
  int64_t labeled_rows = -1;  // batch rows [0, L) carry labels, [L, B) do not; -1: all do
};

// Adds K children (spec.children) of the parent's network (the non-leaf ancestors of
// its output nodes) and the supervised loss on the network spec.loss_on names. The
// parent's nodes stay as they are; children point at its inputs and parameters.
class PerturbPass : public Pass {
 public:
  PerturbPass(PseudoEnsembleSpec spec, EnsembleOptions options, bool attach_loss = true)
      : spec_(std::move(spec)), options_(options), attach_loss_(attach_loss) {}
  std::string_view name() const override { return "perturb"; }
  Graph run(const Graph& parent) const override;

 private:
  PseudoEnsembleSpec spec_;
  EnsembleOptions options_;
  bool attach_loss_;
};

// Adds the agreement penalties of spec.penalties to a graph PerturbPass made.
class PenaltyPass : public Pass {
 public:
  PenaltyPass(PseudoEnsembleSpec spec, EnsembleOptions options)
      : spec_(std::move(spec)), options_(options) {}
  std::string_view name() const override { return "penalties"; }
  Graph run(const Graph& perturbed) const override;

 private:
  PseudoEnsembleSpec spec_;
  EnsembleOptions options_;
};

// The training graph: perturb, penalties, then dead nodes pruned (the clean parent
// network disappears when neither the loss nor a penalty reads it). Verified.
Graph build_pseudo_ensemble(const Graph& parent, const PseudoEnsembleSpec& spec,
                            const EnsembleOptions& options = {});

// For each penalty: the tapped layer, the parent node (empty when the training graph does
// not contain the clean parent), the children's tap nodes, the kind, lambda and rows.
struct Tap {
  std::string layer;
  std::string parent;
  std::vector<std::string> children;
  std::string penalty;
  double lambda = 0;
  std::string rows;
};
std::vector<Tap> tap_table(const Graph& ensemble, const PseudoEnsembleSpec& spec);

// Inference graphs. samples = 0: the parent's network alone, noise ignored. samples = K:
// K sampled children and, per output node "out", "mc/out" = the mean over the children
// of softmax(out) (Monte-Carlo averaging, as for subspace sampling at test time).
Graph build_inference(const Graph& parent, int64_t samples = 0, uint64_t seed = 0);

}  // namespace pens
