// Tape<T>::ProbeRunner (autodiff/tape.cpp's alone: not an installed header).
#pragma once

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/graph/noise.h"
#include "pens/ops/ir/error.h"

namespace pens {

// A probe node's body (graph/graph.h, ProbeBody) compiled on a tape of its own, with the
// gradient of its objective with respect to the perturbation tried and none into the
// parameter store. Each forward() of the outer tape copies the body's inputs from the
// outer tape's values, shares its noise key and row placement (so the body draws the
// outer child's masks), and lets the noise kind's probe function ask for gradients.
template <class T>
class Tape<T>::ProbeRunner final : public PerturbationProbe {
 public:
  ProbeRunner(const Tape& outer, const Node& node, const ProbeBody& body, ParamStore<T>& params)
      : kind_(NoiseRegistry::global().at(body.kind)), params_(body.params), name_(node.name), outer_params_(params) {
    if (!kind_.probe) fail("probe '", name_, "': noise kind '", body.kind, "' has no probe function");
    if (!body.graph) fail("probe '", name_, "' has no body: build the graph with build_pseudo_ensemble");
    // A kind may ask for its body in double precision (attribute precision: float64), so
    // that a finite-difference step as small as VAT's ξ (1e-6) is not lost where a float
    // input near 1 cannot hold it. Otherwise the body's products stay float32 whatever the
    // outer tape's precision: inputs rounded to bfloat16 (8 bits of mantissa) would erase
    // the step.
    if (params_.has("precision") && params_.get_string("precision") == "float64") {
      wide_params_ = std::make_unique<ParamStore<double>>(*body.graph);
      for (const ParamEntry& e : wide_params_->entries()) {
        const ParamEntry& from = outer_params_.at(e.name);
        if (from.shape != e.shape) fail("probe '", name_, "': parameter '", e.name, "' has another shape in its body");
        widened_.push_back({from.offset, e.offset, e.shape.numel()});
      }
      wide_.compile(outer, *body.graph, *wide_params_, name_, {});
    } else {
      narrow_.compile(outer, *body.graph, params, name_, Precision::Float32);
    }
    const Shape& shape = wide_params_ ? wide_.perturbation.shape : narrow_.perturbation.shape;
    rows_ = shape.rank > 0 ? shape[0] : 1;
    width_ = rows_ > 0 ? shape.numel() / rows_ : 0;
    tried_.resize(static_cast<size_t>(shape.numel()));
    for (std::vector<double>& buffer : scratch_) buffer.resize(tried_.size());
  }

  // Computes the probe's value into `out`, drawing from `draws` (the probe node's stream,
  // placed like the outer tape's rows).
  void run(const Tape& outer, TensorView<T> out, const NoiseStream& draws) {
    if (wide_params_) {
      // The parameters as the outer tape holds them now, widened.
      const std::span<const T> from = outer_params_.values();
      const std::span<double> to = wide_params_->values();
      for (const Widened& w : widened_) std::copy_n(from.data() + w.from, w.count, to.data() + w.to);
      wide_.prepare(outer);
    } else {
      narrow_.prepare(outer);
    }
    draws_ = &draws;
    kind_.probe(*this, params_, tried_);
    std::transform(tried_.begin(), tried_.end(), out.data, [](double x) { return static_cast<T>(x); });
  }

  int64_t rows() const override { return rows_; }
  int64_t width() const override { return width_; }
  void gradient(std::span<const double> r, std::span<double> grad) override {
    if (wide_params_) {
      wide_.gradient(name_, r, grad);
    } else {
      narrow_.gradient(name_, r, grad);
    }
  }
  std::span<double> scratch(int which) override {
    if (which < 0 || which >= static_cast<int>(scratch_.size())) fail("probe '", name_, "': no scratch buffer ", which);
    return scratch_[static_cast<size_t>(which)];
  }
  void normal(std::span<double> out) override {
    draws_->for_rows(0, rows_, [&](int64_t row, int64_t global, int64_t n) {
      draws_->normal(out.data() + row * width_, n * width_, 1.0, global * width_);
    });
  }

 private:
  // The body compiled on a tape of element type B, with the gradient of its objective
  // with respect to the perturbation and none into a parameter store.
  template <class B>
  struct Body {
    std::unique_ptr<Tape<B>> tape;
    std::vector<std::pair<size_t, TensorView<B>>> copies;  // outer slot -> the body's input
    TensorView<B> perturbation;

    void compile(const Tape& outer, const Graph& graph, ParamStore<B>& params, const std::string& name,
                 std::optional<Precision> precision) {
      CompileOptions options{.batch = outer.options_.batch, .grad_inputs_named = {name}, .param_grads = false};
      if (precision) options.precision = *precision;
      tape = std::make_unique<Tape<B>>(graph, params, options);
      for (NodeId v : graph.nodes()) {
        const Node& n = graph[v];
        if (!is_input(n) || n.name == name) continue;
        auto it = outer.by_name_.find(n.name);
        if (it == outer.by_name_.end() || outer.slots_[it->second].info.shape != tape->info(n.name).shape) {
          fail("probe '", name, "': its body reads input '", n.name, "', which the graph lacks or has in another shape");
        }
        copies.emplace_back(it->second, tape->input(n.name));
      }
      perturbation = tape->input(name);
    }
    // The body's inputs, noise key and row placement from the outer tape.
    void prepare(const Tape& outer) {
      for (const auto& [slot, to] : copies) std::copy_n(outer.slots_[slot].value, to.size(), to.data);
      tape->set_noise_key(outer.key_);
      if (!outer.placement_.empty()) tape->set_row_placement(outer.placement_);
    }
    void gradient(const std::string& name, std::span<const double> r, std::span<double> grad) {
      std::transform(r.begin(), r.end(), perturbation.data, [](double x) { return static_cast<B>(x); });
      tape->forward();
      tape->backward();
      const B* g = tape->grad(name).data;  // null: the objective does not depend on it
      if (g) {
        std::copy_n(g, grad.size(), grad.begin());
      } else {
        std::fill(grad.begin(), grad.end(), 0.0);
      }
    }
  };
  struct Widened {
    int64_t from, to, count;  // offsets into the outer store and the body's, elements
  };

  const NoiseKind& kind_;
  Attributes params_;
  std::string name_;
  ParamStore<T>& outer_params_;
  Body<T> narrow_;
  std::unique_ptr<ParamStore<double>> wide_params_;  // set: the body runs in double
  Body<double> wide_;
  std::vector<Widened> widened_;
  int64_t rows_ = 0, width_ = 0;
  std::vector<double> tried_;  // the probe function's output
  std::array<std::vector<double>, 2> scratch_;  // scratch(0), scratch(1)
  const NoiseStream* draws_ = nullptr;  // during run()
};

}  // namespace pens
