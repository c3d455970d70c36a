// MNIST from its four raw IDX files (scripts/fetch-mnist.sh puts them in data/mnist).
#pragma once

#include <string>

#include "pens/models/dataset.h"

namespace pens {

// part: "train" (60,000 examples) or "test" (10,000). Pixels scaled to [0, 1], 784 per
// image; labels 0-9. Every fault (a missing or corrupt file, counts that differ between
// images and labels, a label outside 0-9) is an Error naming the file.
Dataset load_mnist(const std::string& dir, const std::string& part);

}  // namespace pens
