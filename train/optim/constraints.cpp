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
  int64_t most_blocks = 0;
  for (const ParamEntry& e : params.entries()) {
    const Attributes& a = model[e.name].attrs;
    if (!a.has("max_norm")) continue;
    if (e.shape.rank != 2) {
      fail("parameter '", e.name, "': max_norm needs a matrix, the shape is ", e.shape.str());
    }
    bounds_.push_back({&e, a.get_float("max_norm"), Eigen::Array<float, 1, Eigen::Dynamic>(e.shape.cols())});
    most_blocks += (e.shape.cols() + 15) / 16;
  }
  columns_.reserve(static_cast<size_t>(most_blocks));
}

template <class BeforeRead>
void MaxNorm::constrain(std::span<const ParamEntry* const> held, const BeforeRead& before_read) {
  const auto free = [&](const Bound& c) { return std::ranges::find(held, c.param) == held.end(); };
  if (rule_ == MaxNormRule::InputOutgoingSquared) {
    for (const Bound& c : bounds_) {
      if (!free(c)) continue;
      auto w = params_.value(*c.param).mat();
      parallel_rows(w.rows(), w.cols(), [&](int64_t first, int64_t count) {
        before_read(*c.param, first * w.cols(), count * w.cols());
        for (int64_t i = first; i < first + count; ++i) {
          const double squared = w.row(i).squaredNorm();
          if (squared > c.max_norm) w.row(i) *= static_cast<float>(std::sqrt(c.max_norm / squared));
        }
      });
    }
    return;
  }
  // Unit-incoming: blocks of whole columns, of every matrix at once, on the pool. A
  // column's norm is summed down its rows in one block, rows ascending, so the blocks'
  // widths do not change a bit; they set how the work streams. Narrow blocks (32 columns
  // of a 784-row matrix, each row's 128 bytes 3,200 bytes from the next) made reading
  // every weight once cost 6 % of a bfloat16 PEA step, and an update fused into them ran
  // at half the speed of its pass over the whole store. So a matrix is one block where
  // it is at most a thread's share of all the bounded weights (whole rows stream), and
  // is cut into that share's width otherwise; the threads take matrices side by side.
  int64_t weights = 0;
  for (const Bound& c : bounds_) weights += free(c) ? c.param->shape.numel() : 0;
  const int64_t share = std::max<int64_t>(1, (weights + threads() - 1) / threads());
  columns_.clear();
  for (Bound& c : bounds_) {
    if (!free(c)) continue;
    const int64_t cols = c.param->shape.cols(), numel = c.param->shape.numel();
    const int64_t width = numel <= share ? cols : std::max<int64_t>(16, (cols * share / numel + 15) / 16 * 16);
    for (int64_t first = 0; first < cols; first += width) columns_.push_back({&c, first, std::min(width, cols - first)});
  }
  parallel_for(static_cast<int64_t>(columns_.size()), [&](int64_t task) {
    const Columns& block = columns_[static_cast<size_t>(task)];
    Bound& c = *block.bound;
    auto w = params_.value(*c.param).mat();
    auto norms = c.column_norms.segment(block.first, block.count);
    norms.setZero();
    for (int64_t i = 0; i < w.rows(); ++i) {
      before_read(*c.param, i * w.cols() + block.first, block.count);
      norms += w.row(i).segment(block.first, block.count).array().square();
    }
    bool any = false;
    for (int64_t j = 0; j < block.count; ++j) {
      const double norm = std::sqrt(static_cast<double>(norms[j]));
      const bool over = norm > c.max_norm;
      norms[j] = over ? static_cast<float>(c.max_norm / norm) : 1.0f;
      any = any || over;
    }
    if (any) {
      for (int64_t i = 0; i < w.rows(); ++i) w.row(i).segment(block.first, block.count).array() *= norms;
    }
  });
}

void MaxNorm::apply(std::span<const ParamEntry* const> held) {
  constrain(held, [](const ParamEntry&, int64_t, int64_t) {});
}

bool MaxNorm::update_and_apply(Optimizer& optimizer, const OptimizerStep& s, std::span<const ParamEntry* const> held) {
  if (!optimizer.elementwise()) return false;
  // The store's stretches outside the bounded matrices the rule reads (held ones
  // included), updated in ranges; the bounds are in store order.
  const auto update = [&](int64_t begin, int64_t end) {
    parallel_ranges(end - begin, [&](int64_t first, int64_t n) { optimizer.step_range(s, begin + first, n); });
  };
  int64_t done = 0;  // the store's values before it are updated
  for (const Bound& c : bounds_) {
    if (std::ranges::find(held, c.param) != held.end()) continue;
    update(done, c.param->offset);
    done = c.param->offset + c.param->shape.numel();
  }
  update(done, static_cast<int64_t>(params_.values().size()));
  constrain(held, [&](const ParamEntry& param, int64_t first, int64_t n) {
    optimizer.step_range(s, param.offset + first, n);
  });
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
