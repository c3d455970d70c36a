// An op defined outside pens: softplus. Register it once at start-up:
//   pens::OpRegistry::register_global<Softplus>();
#pragma once

#include "pens/ops/check_case.h"
#include "pens/ops/op.h"

// softplus: y = log(1 + e^x).  dx = sigmoid(x) = 1 - e^{-y}.
struct Softplus {
  static constexpr const char* kName = "softplus";
  static constexpr const char* kSummary = "log(1 + e^x)";
  static std::vector<pens::InputSlot> inputs() { return {{"x"}}; }
  static pens::ValueInfo infer(const pens::InferCtx& ctx) {
    pens::infer::expect(ctx, 0, -1);  // real, any rank; ctx.fail(...) names the node
    return ctx.in[0];
  }
  template <class T>
  static void forward(const pens::KernelArgs<T>& args) {
    args.out.arr() = (T(1) + args.in[0].arr().exp()).log();
  }
  template <class T>
  static void backward(const pens::KernelArgs<T>& args) {  // ADD into the input gradient
    args.gin[0].arr() += args.gout.arr() * (T(1) - (-args.out.arr()).exp());
  }
  static void check(pens::CheckBuilder& b) { b.check({b.real({3, 4}, pens::uniform(-3, 3))}); }
};
