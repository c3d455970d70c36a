// Batch normalisation (Ioffe & Szegedy 2015) as a block of graph nodes, for any
// architecture built in C++: the batch's mean and variance per feature, normalize with a
// learnt scale and shift, and the running statistics as moving averages of the clean
// pass's batch statistics, read in their place at inference (graph/graph.h,
// MovingAverage). Model files write the same nodes out (docs/model-format.md).
#pragma once

#include <string>

#include "pens/graph/graph.h"

namespace pens {

struct BatchNormSpec {
  double decay = 0.99;  // of the running statistics, per update
  double eps = 1e-5;    // added to the variance
  // false: neither scale nor shift (a ladder network's normalisation, whose shift comes
  // after its noise).
  bool learnt_affine = true;
  // false: no running statistics, for a value inference never computes (a decoder's).
  bool running_statistics = true;
};

// Normalises x [B, n] over its rows. Nodes: "<name>/mean", "<name>/var" and "<name>" (the
// normalised value, returned), in x's layer; parameters "<name>/scale" (1), "<name>/shift"
// (0), and the frozen "<name>/running_mean" (0) and "<name>/running_var" (1), each the
// moving average of its batch statistic.
NodeId add_batch_norm(Graph& g, NodeId x, const std::string& name, const BatchNormSpec& spec = {});

// x [B, n] normalised with the given statistics and neither scale nor shift: "<name>",
// reading the constants "ones<n>" and "zeros<n>" (added once per width).
NodeId add_normalization(Graph& g, NodeId x, NodeId mean, NodeId var, const std::string& name, double eps = 1e-5);

}  // namespace pens
