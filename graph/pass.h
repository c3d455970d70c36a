// Graph passes. A pass reads a graph and returns a new one: the input is never edited,
// so the parent model survives every transformation and passes compose safely.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "pens/graph/graph.h"
#include "pens/graph/infer.h"
#include "pens/ops/ir/error.h"

namespace pens {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  virtual Graph run(const Graph& in) const = 0;
};

// Runs f(), a pass's work, so that an Error it throws says which pass: "pass <name>: ...".
template <class F>
auto within_pass(std::string_view name, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(cat("pass ", name, ": ", e.what()), e.node(), e.field());
  }
}

// Runs passes in order and verifies the graph after each one (binding the batch to
// `batch`); an Error from a pass or from verification names the pass.
Graph run_passes(const Graph& g, const std::vector<std::unique_ptr<Pass>>& passes,
                 int64_t batch = kVerifyBatch);

// Removes every node that no output, loss node or moving average (its source and its
// parameter) depends on.
class PruneDeadNodes : public Pass {
 public:
  std::string_view name() const override { return "prune-dead-nodes"; }
  Graph run(const Graph& in) const override;
};

// Moves table lookups below the noise on their table: embedding(noise(... E), ids), where
// each noise step is weight fuzzing (gaussian_noise) or subspace slicing along non-row axes
// (gather with axis >= 1, gather_axes without axis 0), becomes noise(... embedding(E, ids))
// with the fuzz drawn by lookup_noise exactly as it would be for the whole table. Same
// values, same gradients, at the cost of the rows looked up rather than of the table (a
// 16,000-word vocabulary against the 20 to 60 words of a sentence). Chains whose nodes
// have other consumers are left alone. The replaced nodes stay, unread: PruneDeadNodes,
// which follows it in the pipelines, removes them.
class LookupFirst : public Pass {
 public:
  std::string_view name() const override { return "lookup-first"; }
  Graph run(const Graph& in) const override;
};

// Computes each child on the rows of a batch that something reads: a node whose every
// reader, through row-wise ops (OpDef::row_wise), is a row slice of rows [lo, hi) is
// computed on those rows alone (its batched inputs are sliced; noise ops draw from row lo
// of the whole batch's draw, attribute row_offset), and the slices reading it count from
// lo. Child 2 of a semi-supervised pseudo-ensemble whose penalties read the unlabeled
// rows then costs half. Values and gradients are those of the unrestricted graph (test).
class RestrictRows : public Pass {
 public:
  std::string_view name() const override { return "restrict-rows"; }
  Graph run(const Graph& in) const override;
};

// Normalises a batch's labeled rows [0, L) and unlabeled rows [L, B) with their own batch
// statistics, as the ladder network's code does: each batch normalisation block whose
// mean and variance are the sources of running statistics (mean over rows of x,
// batch_variance, normalize) becomes the two parts' normalizations joined by rows, under
// the block's name (so its noise, penalties and taps stay). "<b>/mean" and "<b>/var" then
// hold the labeled rows' statistics, which the running statistics follow; other readers
// of them (a ladder decoder normalising its estimates, costs on the unlabeled rows) read
// the unlabeled rows', "<b>/mean/unlabeled" and "<b>/var/unlabeled". L < 0 (every row
// labeled): the graph unchanged. Inference graphs are built from the model, not from
// this pass's output: they keep one normalization with the running statistics.
class SplitStatistics : public Pass {
 public:
  explicit SplitStatistics(int64_t labeled_rows) : labeled_rows_(labeled_rows) {}
  std::string_view name() const override { return "split-statistics"; }
  Graph run(const Graph& in) const override;

 private:
  int64_t labeled_rows_;
};

}  // namespace pens
