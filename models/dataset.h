// Labeled examples in memory, batches drawn from them, and the semi-supervised protocol
// of the paper: a class-balanced labeled set, a disjoint validation set, everything else
// unlabeled.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "pens/ops/ir/memory.h"
#include "pens/ops/tensor.h"

namespace pens {

struct Dataset {
  int64_t size = 0;
  int64_t dim = 0;
  int64_t classes = 0;
  std::vector<float> x;  // size × dim, row-major
  std::vector<float> y;  // size labels, as exact integers; -1: an example given without one
  MemoryCharge memory;   // x and y against pens' memory limit (ops/ir/memory.h)
};

// A dataset of `size` zero examples of `dim` values, charged against the memory limit
// first (an Error naming `what` when it does not fit).
Dataset make_dataset(int64_t size, int64_t dim, int64_t classes, const std::string& what);

// Copies examples first, first + 1, ... (wrapping around the end) into a batch of
// inputs x [B, dim] and labels y [B].
void copy_batch(const Dataset& d, int64_t first, TensorView<float> x, TensorView<float> y);

// Copies the examples `rows` into the first rows.size() rows of x (from row `at` on)
// and, when y is given (non-null), their labels into y[at...].
void gather_rows(const Dataset& d, std::span<const int64_t> rows, int64_t at, TensorView<float> x,
                 TensorView<float> y);

// The examples `rows` as a dataset of their own.
Dataset subset(const Dataset& d, std::span<const int64_t> rows);

// The mean of each feature over the examples (in double precision; an Error for an
// empty set).
std::vector<double> feature_means(const Dataset& d);

// Fraction of examples whose largest score is not their label; scores [size, classes].
double error_rate(const Dataset& d, TensorView<const float> scores);

// Indices into a training set. `labeled` holds exactly labeled / classes examples of each
// class; the three sets are disjoint and together cover the set.
struct Split {
  std::vector<int64_t> labeled;
  std::vector<int64_t> unlabeled;
  std::vector<int64_t> validation;
};

// The examples of `d` that carry a label.
int64_t labeled_examples(const Dataset& d);

// The split a seed fixes, the same on every machine: the examples are shuffled by a
// Philox stream of `seed`; the first `validation` with a label become the validation set;
// walking the rest in order, each class's first labeled / classes examples are labeled and
// everything else (the examples without a label among it) is unlabeled. `labeled` must
// be a multiple of the class count.
Split semi_supervised_split(const Dataset& train, int64_t labeled, int64_t validation, uint64_t seed);

// Visits every row of `d` a batch at a time, for a tape compiled for `batch` rows: the
// last batch is padded by repeating the last row. visit(rows, first, n) gets the batch's
// row indices (padding included) and the n real rows it holds, starting at row `first`.
void for_each_batch(const Dataset& d, int64_t batch,
                    const std::function<void(std::span<const int64_t> rows, int64_t first, int64_t n)>& visit);

// A permutation of 0..n-1 fixed by (seed, stream): Fisher-Yates over Philox draws.
std::vector<int64_t> permutation(int64_t n, uint64_t seed, uint64_t stream);

// Batches drawn by cycling through shuffles of a set of rows: the shuffle of pass p is
// permutation(n, seed, stream + p), so the rows of any step are a function of (seed,
// step) alone and a resumed run draws what an unbroken one would.
class Cycler {
 public:
  Cycler(std::vector<int64_t> items, uint64_t seed, uint64_t stream)
      : items_(std::move(items)), seed_(seed), stream_(stream) {}
  // Rows [first, first + n) of the endless sequence, into `out`.
  void take(int64_t first, int64_t n, std::vector<int64_t>& out);
  int64_t size() const { return static_cast<int64_t>(items_.size()); }

 private:
  std::vector<int64_t> items_;
  uint64_t seed_, stream_;
  int64_t pass_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace pens
