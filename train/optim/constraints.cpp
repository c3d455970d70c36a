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
  fused_.reserve(bounds_.size());
}

// Columns per block of the unit-incoming rule: one block per thread. A column's norm is
// summed down its rows within one block, rows ascending, so the width does not change a
// bit; it sets how much of each row a block reads at a time, and the wider the stretches
// the better memory streams them. Blocks of 32 columns (a 784-row matrix split as
// elementwise work is: each row's 128 bytes on a page of their own) made reading every
// weight once cost 6 % of a bfloat16 PEA step, and ran the optimizer fused into them at
// half the speed of its pass over the whole store.
int64_t columns_per_block(int64_t cols) {
  const int64_t per_thread = (cols + threads() - 1) / threads();
  return (per_thread + 15) / 16 * 16;
}

template <class BeforeRows>
void MaxNorm::constrain(const Bound& bound, const BeforeRows& before_rows) {
  auto w = params_.value(*bound.param).mat();
  if (rule_ == MaxNormRule::UnitIncoming) {
    // Blocks of whole columns on the pool: a column's norm accumulated down its rows
    // (each row's stretch contiguous, vectorized, read right after before_rows wrote it),
    // then the block's columns over the bound scaled. Each column is computed by one
    // call, rows ascending, so the bits do not depend on the thread count.
    detail::parallel_blocks(w.cols(), columns_per_block(w.cols()), [&](int64_t first, int64_t count) {
      auto scale = column_scale_.segment(first, count);
      scale.setZero();
      for (int64_t i = 0; i < w.rows(); ++i) {
        before_rows(i, int64_t{1}, first, count);
        scale += w.row(i).segment(first, count).array().square();
      }
      bool any = false;
      for (int64_t j = 0; j < count; ++j) {
        const double norm = std::sqrt(static_cast<double>(scale[j]));
        const bool over = norm > bound.max_norm;
        scale[j] = over ? static_cast<float>(bound.max_norm / norm) : 1.0f;
        any = any || over;
      }
      if (any) {
        for (int64_t i = 0; i < w.rows(); ++i) w.row(i).segment(first, count).array() *= scale;
      }
    });
  } else {
    parallel_rows(w.rows(), w.cols(), [&](int64_t first, int64_t count) {
      before_rows(first, count, int64_t{0}, w.cols());
      for (int64_t i = first; i < first + count; ++i) {
        const double squared = w.row(i).squaredNorm();
        if (squared > bound.max_norm) w.row(i) *= static_cast<float>(std::sqrt(bound.max_norm / squared));
      }
    });
  }
}

void MaxNorm::apply(std::span<const ParamEntry* const> held) {
  for (const Bound& c : bounds_) {
    if (std::ranges::find(held, c.param) == held.end()) constrain(c, [](int64_t, int64_t, int64_t, int64_t) {});
  }
}

bool MaxNorm::update_and_apply(Optimizer& optimizer, const OptimizerStep& s, std::span<const ParamEntry* const> held) {
  if (!optimizer.elementwise()) return false;
  std::vector<const Bound*>& fused = fused_;
  fused.clear();
  for (const Bound& c : bounds_) {
    if (std::ranges::find(held, c.param) == held.end()) fused.push_back(&c);
  }
  std::ranges::sort(fused, {}, [](const Bound* c) { return c->param->offset; });
  const auto update = [&](int64_t begin, int64_t end) {
    parallel_ranges(end - begin, [&](int64_t first, int64_t n) { optimizer.step_range(s, begin + first, n); });
  };
  int64_t done = 0;  // the store's values before it are updated
  for (const Bound* c : fused) {
    const int64_t offset = c->param->offset, cols = c->param->shape.cols();
    update(done, offset);
    constrain(*c, [&](int64_t first_row, int64_t rows, int64_t first_col, int64_t count) {
      if (count == cols) {
        optimizer.step_range(s, offset + first_row * cols, rows * cols);
      } else {
        for (int64_t i = first_row; i < first_row + rows; ++i) optimizer.step_range(s, offset + i * cols + first_col, count);
      }
    });
    done = offset + c->param->shape.numel();
  }
  update(done, static_cast<int64_t>(params_.values().size()));
  return true;
}

void update_and_constrain(Optimizer& optimizer, const OptimizerStep& s,
                          std::span<const std::unique_ptr<Constraint>> constraints,
                          std::span<const ParamEntry* const> held) {
  if (constraints.size() == 1 && constraints[0]->update_and_apply(optimizer, s, held)) return;
  optimizer.step(s);
  for (const auto& c : constraints) c->apply(held);
}

std::vector<std::unique_ptr<Constraint>> model_constraints(const Graph& model, ParamStore<float>& params,
                                                           MaxNormRule rule) {
  std::vector<std::unique_ptr<Constraint>> out;
  auto max_norm = std::make_unique<MaxNorm>(model, params, rule);
  if (!max_norm->empty()) out.push_back(std::move(max_norm));
  return out;
}

}  // namespace pens
