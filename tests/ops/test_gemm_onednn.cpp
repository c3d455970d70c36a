// Products on oneDNN (ops/precision.h, ops/gemm_onednn.cpp), in bfloat16 and in float32:
// what they compute, that their bits do not depend on the thread count, and a tape that
// runs its products on them.
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "pens/autodiff/tape.h"
#include "pens/graph/noise.h"
#include "pens/graph/pseudo_ensemble.h"
#include "pens/models/mlp.h"
#include "pens/ops/gemm.h"
#include "pens/ops/ir/memory.h"
#include "pens/ops/parallel.h"
#include "pens/ops/precision.h"
#include "tests/support/alloc_counter.h"
#include "tests/support/helpers.h"

namespace test_gemm_onednn {

using namespace pens;

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ColMatrix = Eigen::MatrixXf;

struct KeepThreads {
  int saved = threads();
  ~KeepThreads() { set_threads(saved); }
};

// Where bfloat16 cannot run, a test says so and checks nothing else.
bool skipped() {
  const std::string why = bfloat16_unavailable();
  if (!why.empty()) MESSAGE("bfloat16 products skipped: " << why);
  return !why.empty();
}

bool onednn_skipped() {
  const std::string why = onednn_unavailable();
  if (!why.empty()) MESSAGE("float32 products on oneDNN skipped: " << why);
  return !why.empty();
}

float rounded(float x) { return static_cast<float>(Eigen::bfloat16(x)); }

template <class M>
M random_matrix(int64_t rows, int64_t cols, float phase) {
  M x(rows, cols);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) x(i, j) = std::sin(phase + 0.731f * static_cast<float>(i * cols + j));
  }
  return x;
}

// A 64-128-128-10 network's loss and parameter gradients on one batch, its products in
// `precision`; the network and the batch are the same whatever the precision.
std::pair<double, std::vector<float>> mlp_loss_and_gradients(Precision precision) {
  const Graph g = build_mlp({.layers = {64, 128, 128, 10}});
  ParamStore<float> params(g);
  params.initialize(g, 4);
  Tape<float> tape(g, params, {.batch = 32, .precision = precision});
  auto x = tape.input("x");
  for (int64_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  auto y = tape.input("y");
  for (int64_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 10);
  params.zero_grad();
  tape.forward();
  tape.backward();
  return {tape.loss_value(0), std::vector<float>(params.grads().begin(), params.grads().end())};
}

}  // namespace

TEST_CASE("parse_precision names the three precisions and rejects others by name") {
  for (const Precision p : {Precision::Float32, Precision::Float32OneDnn, Precision::BFloat16}) {
    CHECK(parse_precision(precision_name(p), "config") == p);
  }
  CHECK(std::string(precision_name(Precision::BFloat16)) == "bfloat16");
  CHECK(std::string(precision_name(Precision::Float32OneDnn)) == "float32-onednn");
  CHECK_ERROR_MENTIONS(parse_precision("bf16", "run.json"), "run.json", "\"float32-onednn\" or \"bfloat16\"", "\"bf16\"");
  if (const std::string why = onednn_unavailable(); !why.empty()) {
    CHECK_ERROR_MENTIONS(require_precision(Precision::Float32OneDnn, "run.json"), "run.json", why.c_str());
  }
  require_precision(Precision::Float32, "anything");  // float32 runs everywhere
  if (const std::string why = bfloat16_unavailable(); !why.empty()) {
    CHECK_ERROR_MENTIONS(require_precision(Precision::BFloat16, "run.json"), "run.json", why.c_str());
  }
}

TEST_CASE("a bfloat16 product is the float product of the operands rounded to bfloat16") {
  if (skipped()) return;
  // Shapes that make one piece, several row pieces and several column pieces (128 each).
  for (const std::array<int64_t, 3> shape : {std::array<int64_t, 3>{7, 13, 5}, {600, 40, 30}, {20, 70, 530}}) {
    const int64_t m = shape[0], k = shape[1], n = shape[2];  // not a structured binding: lambdas below read them
    const RowMatrix a = random_matrix<RowMatrix>(m, k, 0.1f);
    const ColMatrix b = random_matrix<ColMatrix>(k, n, 0.7f);
    const std::vector<float> bias = [&] {
      std::vector<float> v(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) v[static_cast<size_t>(j)] = 0.01f * static_cast<float>(j);
      return v;
    }();
    // The exact product of the rounded operands, in double.
    const Eigen::MatrixXd exact = a.unaryExpr(&rounded).cast<double>() * b.unaryExpr(&rounded).cast<double>();
    const Eigen::MatrixXd scale = a.cwiseAbs().cast<double>() * b.cwiseAbs().cast<double>();
    for (const bool accumulate : {false, true}) {
      for (const bool with_bias : {false, true}) {
        if (accumulate && with_bias) continue;  // gemm_bias never accumulates
        INFO(m << "x" << k << "x" << n << (accumulate ? ", accumulating" : "") << (with_bias ? ", with bias" : ""));
        RowMatrix c = RowMatrix::Constant(m, n, 0.5f);
        if (with_bias) {
          gemm_bias(c, a, b, bias.data(), Precision::BFloat16);
        } else {
          gemm(c, a, b, accumulate, Precision::BFloat16);
        }
        double worst = 0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            const double want = exact(i, j) + (accumulate ? 0.5 : 0.0) + (with_bias ? bias[static_cast<size_t>(j)] : 0.0);
            worst = std::max(worst, std::abs(c(i, j) - want) / (scale(i, j) + 1.0));
          }
        }
        CHECK(worst < 1e-5);  // float sums of exact bfloat16 products
        // ... and not the float32 product: the operands were rounded.
        RowMatrix f32 = RowMatrix::Constant(m, n, 0.5f);
        gemm(f32, a, b, accumulate);
        CHECK((f32 - c).cwiseAbs().maxCoeff() > 1e-4f);
      }
    }
  }
}

TEST_CASE("bfloat16 products of transposed and column-major operands") {
  if (skipped()) return;
  const ColMatrix a = random_matrix<ColMatrix>(30, 300, 0.3f);   // used as aᵀ: 300 x 30
  const RowMatrix b = random_matrix<RowMatrix>(40, 30, 0.9f);    // used as bᵀ: 30 x 40
  ColMatrix c = ColMatrix::Zero(300, 40);
  gemm(c, a.transpose(), b.transpose(), false, Precision::BFloat16);
  const Eigen::MatrixXd exact =
      a.transpose().unaryExpr(&rounded).cast<double>() * b.transpose().unaryExpr(&rounded).cast<double>();
  CHECK((c.cast<double>() - exact).cwiseAbs().maxCoeff() < 1e-4);
}

TEST_CASE("bfloat16 products give the same bits on 1, 2 and 3 threads") {
  if (skipped()) return;
  KeepThreads keep;
  const RowMatrix a = random_matrix<RowMatrix>(700, 96, 0.2f);
  const RowMatrix b = random_matrix<RowMatrix>(96, 300, 0.4f);
  std::vector<RowMatrix> results;
  for (const int n : {1, 2, 3}) {
    set_threads(n);
    RowMatrix c = RowMatrix::Constant(700, 300, 1.0f);
    gemm(c, a, b, true, Precision::BFloat16);
    RowMatrix wide = RowMatrix::Zero(300, 700);  // wider than high: cut by columns
    gemm(wide, b.transpose(), a.transpose(), false, Precision::BFloat16);
    results.push_back(c);
    results.push_back(wide);
  }
  for (size_t i = 2; i < results.size(); ++i) CHECK(results[i] == results[i % 2]);
}

TEST_CASE("a float32 product on oneDNN is the float32 product, in every layout, with the same bits on 1, 2 and 3 threads") {
  if (onednn_skipped()) return;
  KeepThreads keep;
  // Shapes of one piece, several row pieces and several column pieces; then transposed
  // and column-major operands, which oneDNN reads where they are.
  for (const std::array<int64_t, 3> shape : {std::array<int64_t, 3>{7, 13, 5}, {600, 40, 30}, {20, 70, 530}}) {
    const int64_t m = shape[0], k = shape[1], n = shape[2];
    const RowMatrix a = random_matrix<RowMatrix>(m, k, 0.1f);
    const ColMatrix b = random_matrix<ColMatrix>(k, n, 0.7f);
    std::vector<float> bias(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) bias[static_cast<size_t>(j)] = 0.01f * static_cast<float>(j);
    const Eigen::MatrixXd exact = a.cast<double>() * b.cast<double>();
    const Eigen::MatrixXd scale = a.cwiseAbs().cast<double>() * b.cwiseAbs().cast<double>();
    for (const bool accumulate : {false, true}) {
      for (const bool with_bias : {false, true}) {
        if (accumulate && with_bias) continue;
        INFO(m << "x" << k << "x" << n << (accumulate ? ", accumulating" : "") << (with_bias ? ", with bias" : ""));
        std::vector<RowMatrix> by_threads;
        for (const int t : {1, 2, 3}) {
          set_threads(t);
          RowMatrix c = RowMatrix::Constant(m, n, 0.5f);
          if (with_bias) {
            gemm_bias(c, a, b, bias.data(), Precision::Float32OneDnn);
          } else {
            gemm(c, a, b, accumulate, Precision::Float32OneDnn);
          }
          by_threads.push_back(c);
        }
        CHECK(by_threads[1] == by_threads[0]);
        CHECK(by_threads[2] == by_threads[0]);
        double worst = 0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            const double want = exact(i, j) + (accumulate ? 0.5 : 0.0) + (with_bias ? bias[static_cast<size_t>(j)] : 0.0);
            worst = std::max(worst, std::abs(by_threads[0](i, j) - want) / (scale(i, j) + 1.0));
          }
        }
        CHECK(worst < 1e-6);  // float32's rounding of the sums, no more
      }
    }
  }
  const ColMatrix a = random_matrix<ColMatrix>(30, 300, 0.3f);  // used as aᵀ: 300 x 30
  const RowMatrix b = random_matrix<RowMatrix>(40, 30, 0.9f);   // used as bᵀ: 30 x 40
  ColMatrix c = ColMatrix::Zero(300, 40);
  gemm(c, a.transpose(), b.transpose(), false, Precision::Float32OneDnn);
  const Eigen::MatrixXd exact = a.transpose().cast<double>() * b.transpose().cast<double>();
  CHECK((c.cast<double>() - exact).cwiseAbs().maxCoeff() < 1e-5);
}

TEST_CASE("a tape with float32 products on oneDNN computes the float32 tape's loss and gradients") {
  if (onednn_skipped()) return;
  const auto eigen = mlp_loss_and_gradients(Precision::Float32);
  const auto onednn = mlp_loss_and_gradients(Precision::Float32OneDnn);
  CHECK(onednn.first == doctest::Approx(eigen.first).epsilon(1e-6));
  double worst = 0, largest = 0;
  for (size_t i = 0; i < eigen.second.size(); ++i) {
    worst = std::max(worst, double(std::abs(eigen.second[i] - onednn.second[i])));
    largest = std::max(largest, double(std::abs(eigen.second[i])));
  }
  CHECK(worst <= 1e-5 * largest);
}

namespace {

// The bilinear op's output and input gradients at `rows` rows, its products in `precision`.
std::vector<float> bilinear_values_and_gradients(int64_t rows, Precision precision) {
  const int64_t n = 6;
  Graph g;
  const NodeId v1 = g.input("v1", {rows, n});
  const NodeId v2 = g.input("v2", {rows, n});
  const NodeId y = g.add("bilinear", {v1, g.param("T", {5, n, n}), v2}, {}, "y");
  g.set_flag(g.add("sum", {y}, {}, "loss"), kLoss);
  ParamStore<float> params(g);
  const auto t = params.value("T");
  for (int64_t i = 0; i < t.size(); ++i) t[i] = std::cos(0.29f * static_cast<float>(i));
  Tape<float> tape(g, params, {.grad_inputs = true, .precision = precision});
  for (const char* name : {"v1", "v2"}) {
    auto v = tape.input(name);
    for (int64_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.41f * static_cast<float>(i) + (name[1] == '1' ? 0.f : 1.f));
  }
  params.zero_grad();
  tape.forward();
  tape.backward();
  std::vector<float> out(tape.value("y").data, tape.value("y").data + tape.value("y").size());
  for (const char* name : {"v1", "v2"}) {
    const auto gv = tape.grad(name);
    out.insert(out.end(), gv.data, gv.data + gv.size());
  }
  const auto gt = params.grad("T");
  out.insert(out.end(), gt.data, gt.data + gt.size());
  return out;
}

}  // namespace

TEST_CASE("the bilinear op on oneDNN computes the float32 op's values and gradients at every row count") {
  if (onednn_skipped()) return;
  // 5: products output by output; 20: one product over the outer products; 100: the
  // outer products in chunks of 64 rows (forward), a product per slice (backward).
  for (const int64_t rows : {5, 20, 100}) {
    CAPTURE(rows);
    const std::vector<float> eigen = bilinear_values_and_gradients(rows, Precision::Float32);
    const int64_t made = onednn_primitives_made();
    const std::vector<float> onednn = bilinear_values_and_gradients(rows, Precision::Float32OneDnn);
    CHECK((rows <= 8 || onednn_primitives_made() > made));  // up to 8 rows, no packed product
    REQUIRE(eigen.size() == onednn.size());
    double worst = 0, largest = 0;
    for (size_t i = 0; i < eigen.size(); ++i) {
      worst = std::max(worst, double(std::abs(eigen[i] - onednn[i])));
      largest = std::max(largest, double(std::abs(eigen[i])));
    }
    CHECK(worst <= 1e-5 * largest);
    CHECK(std::count(eigen.begin(), eigen.end(), 0.0f) == 0);  // every value and gradient checked
  }
}

TEST_CASE("a tape in bfloat16 computes the float32 tape's loss and gradients to bfloat16's precision") {
  if (skipped()) return;
  const auto [loss32, grads32] = mlp_loss_and_gradients(Precision::Float32);
  const auto [loss16, grads16] = mlp_loss_and_gradients(Precision::BFloat16);
  CHECK(loss16 == doctest::Approx(loss32).epsilon(1e-2));
  CHECK(loss16 != loss32);
  double dot = 0, norm32 = 0, norm16 = 0;
  for (size_t i = 0; i < grads32.size(); ++i) {
    dot += double(grads32[i]) * grads16[i];
    norm32 += double(grads32[i]) * grads32[i];
    norm16 += double(grads16[i]) * grads16[i];
  }
  CHECK(dot / std::sqrt(norm32 * norm16) > 0.999);  // the same direction
  CHECK(std::sqrt(norm16 / norm32) == doctest::Approx(1.0).epsilon(1e-2));

  // oneDNN's primitives are made in the first step and kept: later steps make none and
  // hold on to no memory (oneDNN's execute() itself allocates a few small argument maps).
  const Graph g = build_mlp({.layers = {64, 128, 128, 10}});
  ParamStore<float> params(g);
  params.initialize(g, 4);
  Tape<float> tape(g, params, {.batch = 32, .precision = Precision::BFloat16});
  tape.forward();
  tape.backward();
  const int64_t made = onednn_primitives_made();
  CHECK(made > 0);
  for (int step = 0; step < 3; ++step) {
    testing::CountAllocations count;
    tape.forward();
    tape.backward();
    CHECK(count.live_bytes() == 0);
  }
  CHECK(onednn_primitives_made() == made);
}

TEST_CASE("a thread's bfloat16 copies of the operands are charged against the memory limit while it lives") {
  if (skipped()) return;
  KeepThreads keep;
  set_threads(1);
  const RowMatrix a = random_matrix<RowMatrix>(512, 300, 0.2f);
  const RowMatrix b = random_matrix<RowMatrix>(300, 200, 0.4f);
  const uint64_t before = memory_charged();
  uint64_t during = 0;
  std::thread([&] {  // a thread of its own: its copies start empty and go when it ends
    RowMatrix c(512, 200);
    gemm(c, a, b, false, Precision::BFloat16);
    during = memory_charged();
  }).join();
  CHECK(during - before >= (512 * 300 + 300 * 200) * sizeof(Eigen::bfloat16));
  CHECK(memory_charged() == before);
}

TEST_CASE("in a bfloat16 tape, VAT's probe still finds the float32 tape's direction") {
  if (skipped()) return;
  // The probe's body differentiates through a step of ξ = 1e-6, which bfloat16 operands
  // erase: its products stay float32 (autodiff/probe_runner.h). In bfloat16 the direction
  // came out NaN at this ξ.
  Graph parent = build_mlp({.layers = {784, 256, 10}, .weight_std = 0.05, .output_bias = 0.2});
  add_noise(parent, parent.at("x"), "adversarial", {{"eps", 2.0}, {"xi", 1e-6}, {"iterations", 1}});
  PseudoEnsembleSpec spec;
  spec.children = 1;
  spec.pairing = "parent-child";
  spec.penalties = {{"logits", "kl", 1.0, "all", true}};
  const PseudoEnsemble e = build_pseudo_ensemble(parent, spec);
  ParamStore<float> params(e.graph);
  params.initialize(e.graph, 5);
  constexpr int64_t kRows = 16, kWidth = 784;
  const auto direction = [&](Precision precision) {
    Tape<float> tape(e.graph, params, {.batch = kRows, .precision = precision});
    auto x = tape.input("x");
    for (int64_t i = 0; i < x.size(); ++i) x[i] = 0.5f + 0.5f * std::sin(0.37f * static_cast<float>(i));
    auto y = tape.input("y");
    for (int64_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 10);
    tape.set_noise_key({7, 3});
    tape.forward();
    const auto r = tape.value("c1/x~r_adv");
    return std::vector<float>(r.data, r.data + r.size());
  };
  const std::vector<float> r32 = direction(Precision::Float32), r16 = direction(Precision::BFloat16);
  for (int64_t i = 0; i < kRows; ++i) {
    double dot = 0, n32 = 0, n16 = 0;
    for (int64_t j = i * kWidth; j < (i + 1) * kWidth; ++j) {
      dot += double(r32[j]) * r16[j];
      n32 += double(r32[j]) * r32[j];
      n16 += double(r16[j]) * r16[j];
    }
    CAPTURE(i);
    CHECK(dot / std::sqrt(n32 * n16) > 0.999);
  }
}

}  // namespace test_gemm_onednn
