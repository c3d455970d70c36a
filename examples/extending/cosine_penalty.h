// A penalty kind defined outside pens: cosine distance between the two taps,
// V(a, b) = 1 - cos(a, b) per row. Register it once at start-up:
//   pens::PenaltyRegistry::register_global(cosine_penalty());
#pragma once

#include "pens/graph/penalty.h"

inline pens::PenaltyKind cosine_penalty() {
  return {"cosine", "1 - cos(a, b)", /*symmetrised=*/false,
          [](pens::PenaltyBuilder& b, pens::NodeId x, pens::NodeId y) {
            const pens::NodeId x_hat = b.add("l2_normalize", {x}, {{"eps", 1e-12}});
            const pens::NodeId y_hat = b.add("l2_normalize", {y}, {{"eps", 1e-12}});
            const pens::NodeId cos = b.row_sum(b.add("mul", {x_hat, y_hat}));
            return b.add("sub", {b.scalar(1.0), cos});  // [R]: the scalar 1 broadcasts
          }};
}
