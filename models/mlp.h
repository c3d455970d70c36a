// Multilayer perceptrons as pens graphs: the paper's MNIST network (784-800-800-10,
// ReLU, softmax cross-entropy) and smaller ones for tests and examples.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pens/graph/graph.h"

namespace pens {

struct MlpSpec {
  std::vector<int64_t> layers;  // widths, input first: {784, 800, 800, 10}
  // Dropout on each layer's input, applied inside the graph (standard dropout, "SDE").
  double input_dropout = 0.0;   // on the network input
  double hidden_dropout = 0.0;  // on the input of every later layer, output layer included
  // Initialization, as in the paper: weights N(0, 0.01²), hidden biases 0.1, output 0.
  double weight_std = 0.01;
  // Non-empty: each weight matrix's standard deviation, the first layer's first, in place
  // of weight_std (He initialisation: sqrt(2 / fan-in) for each).
  std::vector<double> layer_weight_std = {};
  double hidden_bias = 0.1;
  double output_bias = 0.0;
  double max_norm = 0.0;              // > 0: L2 bound on each unit's incoming weights
  // Batch normalisation of every hidden pre-activation (models/batch_norm.h), which then
  // has no bias: a<i> = h<i-1>·W<i>, normalised as "bn<i>" before the ReLU.
  bool batch_norm = false;
  // With batch_norm: the output layer's x·W normalised too (no bias), its value "logits",
  // as the VAT authors' network for semi-supervised MNIST normalises every layer.
  bool batch_norm_output = false;
  double batch_norm_decay = 0.99;
  // Noise annotations, for pseudo-ensembles: they perturb the children a perturb pass
  // derives, never the parent itself. In the authors' order: Gaussian noise on the input,
  // then masking of each layer's input; Gaussian "bias noise" on hidden pre-activations.
  double mask_input = 0.0;       // mask(p) on x
  double mask_hidden = 0.0;      // mask(p) on every hidden layer's output
  double gaussian_input = 0.0;   // gaussian(sigma) on x
  double gaussian_bias = 0.0;    // gaussian(sigma) on every hidden pre-activation a<i>
  std::string loss = "softmax_xent";  // or "squared_hinge"
  // Non-empty (one value per input feature): the network reads x − input_mean, and the
  // input noise perturbs that, as the authors' code fed zero-mean images to their 600-3000
  // label runs. The means are constants of the graph, so a saved model carries them.
  std::vector<double> input_mean = {};
};

// Node names: inputs "x" [B, layers[0]] and "y" [B] (labels); per layer i = 1..L
// parameters "W<i>", "b<i>" and pre-activation "a<i>"; hidden activations "h<i>";
// the output scores "logits" (flagged output); per-example losses "losses"; their mean
// "loss" (flagged loss). Layer tags: "h<i>" for hidden layers, "out" for the last. With
// batch_norm, hidden layers have no "b<i>" and add the nodes and parameters of "bn<i>";
// so does the output layer with batch_norm_output, whose normalised value is "logits".
// With input_mean, the constant "x_mean" and "xc" = x − x_mean (layer "in", carrying the
// input noise) come before the first layer.
Graph build_mlp(const MlpSpec& spec);

}  // namespace pens
