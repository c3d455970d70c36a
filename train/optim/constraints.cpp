#include "pens/train/optim/constraints.h"

#include <algorithm>
#include <cmath>

#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"

namespace pens {

MaxNormRule parse_max_norm_rule(const std::string& name) {
  if (name == "unit-incoming") return MaxNormRule::UnitIncoming;
  if (name == "input-outgoing-squared") return MaxNormRule::InputOutgoingSquared;
  fail("max-norm rule '", name, "': expected unit-incoming (the paper) or input-outgoing-squared (the authors' code)");
}

MaxNorm::MaxNorm(const Graph& model, ParamStore<float>& params, MaxNormRule rule) : params_(params), rule_(rule) {
  for (const ParamEntry& e : params.entries()) {
    const Attributes& a = model[e.name].attrs;
    if (!a.has("max_norm")) continue;
    if (e.shape.rank != 2) {
      fail("parameter '", e.name, "': max_norm needs a matrix, the shape is ", e.shape.str());
    }
    bounds_.push_back({&e, a.get_float("max_norm")});
    column_scale_.resize(std::max(column_scale_.size(), e.shape.cols()));
  }
}

void MaxNorm::apply(std::span<const ParamEntry* const> held) {
  for (const Bound& c : bounds_) {
    if (std::ranges::find(held, c.param) != held.end()) continue;
    auto w = params_.value(*c.param).mat();
    if (rule_ == MaxNormRule::UnitIncoming) {
      // Blocks of whole columns on the pool: a column's norm accumulated down its rows
      // (each row's stretch contiguous, vectorized), then the block's columns over the
      // bound scaled. Each column is computed by one call, rows ascending, so the bits do
      // not depend on the thread count.
      parallel_columns(w.rows(), w.cols(), [&](int64_t first, int64_t count) {
        auto scale = column_scale_.segment(first, count);
        scale.setZero();
        for (int64_t i = 0; i < w.rows(); ++i) scale += w.row(i).segment(first, count).array().square();
        bool any = false;
        for (int64_t j = 0; j < count; ++j) {
          const double norm = std::sqrt(static_cast<double>(scale[j]));
          const bool over = norm > c.max_norm;
          scale[j] = over ? static_cast<float>(c.max_norm / norm) : 1.0f;
          any = any || over;
        }
        if (any) {
          for (int64_t i = 0; i < w.rows(); ++i) w.row(i).segment(first, count).array() *= scale;
        }
      });
    } else {
      parallel_rows(w.rows(), w.cols(), [&](int64_t first, int64_t count) {
        for (int64_t i = first; i < first + count; ++i) {
          const double squared = w.row(i).squaredNorm();
          if (squared > c.max_norm) w.row(i) *= static_cast<float>(std::sqrt(c.max_norm / squared));
        }
      });
    }
  }
}

std::vector<std::unique_ptr<Constraint>> model_constraints(const Graph& model, ParamStore<float>& params,
                                                           MaxNormRule rule) {
  std::vector<std::unique_ptr<Constraint>> out;
  auto max_norm = std::make_unique<MaxNorm>(model, params, rule);
  if (!max_norm->empty()) out.push_back(std::move(max_norm));
  return out;
}

}  // namespace pens
