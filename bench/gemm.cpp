// pens' matrix-product rate (ops/gemm.h: Eigen's GEMM on panels of row-major float
// matrices over the thread pool, as ops/defs/linear.cpp runs it) at the shapes of the
// eight products of a training step of the 784-800-800-10 network over --batch rows
// (three forward, three weight gradients, the input gradients of layers 2 and 3: the
// useful work bench/compare-torch.sh counts) and at 1024³.
// Prints one JSON object per shape: {"side": "pens", "case", "m", "k", "n", "threads",
// "precision", "gflops"}; bench/gemm.sh sets the peer's figures beside them. --precision
// float32-onednn or bfloat16 times the products as such a tape runs them (ops/precision.h:
// oneDNN).
//
// --shape M,K,N times that one product instead (",T" after N: B held transposed, as a
// row-major N × K), e.g. a tree level's bilinear product 32,4900,70,T.
//
//   build/bench/gemm [--threads T] [--batch B] [--reps N] [--precision float32|float32-onednn|bfloat16]
//                    [--shape M,K,N[,T]]
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "pens/ops/gemm.h"
#include "pens/ops/parallel.h"

namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// One product C = op(A) op(B) with C of m × n and inner dimension k.
struct Case {
  std::string name;
  int64_t m, k, n;
  bool transpose_a, transpose_b;
};

double gflops(const Case& c, int reps, pens::Precision precision) {
  Matrix a = c.transpose_a ? Matrix::Random(c.k, c.m) : Matrix::Random(c.m, c.k);
  Matrix b = c.transpose_b ? Matrix::Random(c.n, c.k) : Matrix::Random(c.k, c.n);
  Matrix out(c.m, c.n);
  const auto run = [&] {
    using pens::gemm;
    if (!c.transpose_a && !c.transpose_b) gemm(out.block(0, 0, c.m, c.n), a, b, false, precision);
    if (c.transpose_a && !c.transpose_b) gemm(out.block(0, 0, c.m, c.n), a.transpose(), b, false, precision);
    if (!c.transpose_a && c.transpose_b) gemm(out.block(0, 0, c.m, c.n), a, b.transpose(), false, precision);
    if (c.transpose_a && c.transpose_b) gemm(out.block(0, 0, c.m, c.n), a.transpose(), b.transpose(), false, precision);
  };
  for (int i = 0; i < 3; ++i) run();
  std::vector<double> seconds;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return 2.0 * static_cast<double>(c.m * c.k * c.n) / seconds[seconds.size() / 2] / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 30;
  int64_t batch = 100;
  pens::Precision precision = pens::Precision::Float32;
  std::string shape;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--shape") == 0) shape = argv[i + 1];
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--batch") == 0) batch = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--precision") == 0) precision = pens::parse_precision(argv[i + 1], "--precision");
  }
  pens::require_precision(precision, "--precision");
  pens::set_threads(threads);
  std::vector<Case> cases = {
      {"forward x·W1", batch, 784, 800, false, false},
      {"forward h1·W2", batch, 800, 800, false, false},
      {"forward h2·W3", batch, 800, 10, false, false},
      {"backward dW1 = xᵀ·g", 784, batch, 800, true, false},
      {"backward dW2 = h1ᵀ·g", 800, batch, 800, true, false},
      {"backward dW3 = h2ᵀ·g", 800, batch, 10, true, false},
      {"backward dh1 = g·W2ᵀ", batch, 800, 800, false, true},
      {"backward dh2 = g·W3ᵀ", batch, 10, 800, false, true},
      {"square 1024", 1024, 1024, 1024, false, false},
  };
  if (!shape.empty()) {
    long long m = 0, k = 0, n = 0;
    char transposed = 0;
    const int read = std::sscanf(shape.c_str(), "%lld,%lld,%lld,%c", &m, &k, &n, &transposed);
    if (read < 3 || m < 1 || k < 1 || n < 1 || (read == 4 && transposed != 'T')) {
      std::fprintf(stderr, "gemm: --shape takes M,K,N or M,K,N,T with positive sizes, got '%s'\n", shape.c_str());
      return 2;
    }
    cases = {{"shape " + shape, m, k, n, false, read == 4}};
  }
  for (const Case& c : cases) {
    std::printf("{\"side\": \"pens\", \"case\": \"%s\", \"m\": %lld, \"k\": %lld, \"n\": %lld, \"threads\": %d, "
                "\"precision\": \"%s\", \"gflops\": %.1f}\n",
                c.name.c_str(), static_cast<long long>(c.m), static_cast<long long>(c.k), static_cast<long long>(c.n),
                threads, pens::precision_name(precision),
                gflops(c, c.m * c.k * c.n > 100000000 ? std::max(3, reps / 5) : reps, precision));
  }
  return 0;
}
