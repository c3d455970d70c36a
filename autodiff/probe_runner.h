// Tape<T>::ProbeRunner (autodiff/tape.cpp's alone: not an installed header).
#pragma once

#include <algorithm>
#include <memory>
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
      : kind_(NoiseRegistry::global().at(body.kind)), params_(body.params), name_(node.name) {
    if (!kind_.probe) fail("probe '", name_, "': noise kind '", body.kind, "' has no probe function");
    if (!body.graph) fail("probe '", name_, "' has no body: build the graph with build_pseudo_ensemble");
    // The body's products stay float32 whatever the outer tape's precision: a probe
    // differentiates through a step as small as VAT's ξ (1e-6), which inputs rounded to
    // bfloat16 (8 bits of mantissa) would erase.
    body_ = std::make_unique<Tape<T>>(*body.graph, params,
                                      CompileOptions{.batch = outer.options_.batch,
                                                     .grad_inputs_named = {name_},
                                                     .param_grads = false,
                                                     .precision = Precision::Float32});
    for (NodeId v : body.graph->nodes()) {
      const Node& n = (*body.graph)[v];
      if (!is_input(n) || n.name == name_) continue;
      auto it = outer.by_name_.find(n.name);
      if (it == outer.by_name_.end() || outer.slots_[it->second].info.shape != body_->info(n.name).shape) {
        fail("probe '", name_, "': its body reads input '", n.name, "', which the graph lacks or has in another shape");
      }
      copies_.emplace_back(it->second, body_->input(n.name));
    }
    perturbation_ = body_->input(name_);
    const Shape& shape = perturbation_.shape;
    rows_ = shape.rank > 0 ? shape[0] : 1;
    width_ = rows_ > 0 ? shape.numel() / rows_ : 0;
    tried_.resize(static_cast<size_t>(shape.numel()));
  }

  // Computes the probe's value into `out`, drawing from `draws` (the probe node's stream,
  // placed like the outer tape's rows).
  void run(const Tape& outer, TensorView<T> out, const NoiseStream& draws) {
    for (const auto& [slot, to] : copies_) std::copy_n(outer.slots_[slot].value, to.size(), to.data);
    body_->set_noise_key(outer.key_);
    if (!outer.placement_.empty()) body_->set_row_placement(outer.placement_);
    draws_ = &draws;
    kind_.probe(*this, params_, tried_);
    std::transform(tried_.begin(), tried_.end(), out.data, [](double x) { return static_cast<T>(x); });
  }

  int64_t rows() const override { return rows_; }
  int64_t width() const override { return width_; }
  void gradient(std::span<const double> r, std::span<double> grad) override {
    std::transform(r.begin(), r.end(), perturbation_.data, [](double x) { return static_cast<T>(x); });
    body_->forward();
    body_->backward();
    const T* g = body_->grad(name_).data;  // null: the objective does not depend on it
    if (g) {
      std::copy_n(g, grad.size(), grad.begin());
    } else {
      std::fill(grad.begin(), grad.end(), 0.0);
    }
  }
  void normal(std::span<double> out) override {
    draws_->for_rows(0, rows_, [&](int64_t row, int64_t global, int64_t n) {
      draws_->normal(out.data() + row * width_, n * width_, 1.0, global * width_);
    });
  }

 private:
  const NoiseKind& kind_;
  Attributes params_;
  std::string name_;
  std::unique_ptr<Tape<T>> body_;
  std::vector<std::pair<size_t, TensorView<T>>> copies_;  // outer slot -> the body's input
  TensorView<T> perturbation_;
  int64_t rows_ = 0, width_ = 0;
  std::vector<double> tried_;  // the probe function's output
  const NoiseStream* draws_ = nullptr;  // during run()
};

}  // namespace pens
