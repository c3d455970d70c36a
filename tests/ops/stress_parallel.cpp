// The thread pool and the products on it under ThreadSanitizer (scripts/test.sh builds
// this program alone with -fsanitize=thread and runs it): many short jobs back to back,
// callers from two threads at once, and products on 1, 2 and 3 threads. A worker that
// entered a job late must never run a chunk of the next one with the old body: an early
// version of the pool did, and only this program caught it. Exit status 1 on a wrong
// result; ThreadSanitizer exits non-zero on a race.
#include <Eigen/Core>
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "pens/ops/gemm.h"
#include "pens/ops/parallel.h"

int main() {
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  int wrong = 0;
  for (const int n : {2, 3}) {
    pens::set_threads(n);
    std::vector<int> runs(8, 0);
    for (int job = 0; job < 20000; ++job) {
      const int chunks = job % 7 + 1;
      pens::parallel_for(chunks, [&](int64_t c) { ++runs[static_cast<size_t>(c)]; });
      for (int c = 0; c < chunks; ++c) {
        wrong += runs[static_cast<size_t>(c)] != 1;
        runs[static_cast<size_t>(c)] = 0;
      }
    }
    std::atomic<int> total{0};
    const auto caller = [&] {
      for (int i = 0; i < 2000; ++i) pens::parallel_for(3, [&](int64_t) { total.fetch_add(1); });
    };
    std::thread a(caller), b(caller);
    a.join();
    b.join();
    wrong += total.load() != 12000;
  }
  const Matrix a = Matrix::Random(300, 200), b = Matrix::Random(200, 500);
  Matrix one(300, 500), many(300, 500);
  pens::set_threads(1);
  pens::gemm(one.block(0, 0, 300, 500), a, b, false);
  for (const int n : {2, 3}) {
    pens::set_threads(n);
    for (int r = 0; r < 50; ++r) {
      pens::gemm(many.block(0, 0, 300, 500), a, b, false);
      wrong += !(one == many);
    }
  }
  // Products from two threads at once (one holds the pool, the other runs inline on its
  // own buffers) and products inside the chunks of another parallel_for (each worker on
  // its slot's buffers, sized by itself): the workers' buffers are shared state that the
  // thread starting a product sizes before the workers join.
  pens::set_threads(3);
  std::atomic<int> concurrent_wrong{0};
  const auto products = [&] {
    Matrix mine(300, 500);
    for (int r = 0; r < 30; ++r) {
      pens::gemm(mine.block(0, 0, 300, 500), a, b, false);
      concurrent_wrong += !(one == mine);
    }
  };
  std::thread first(products), second(products);
  first.join();
  second.join();
  std::vector<Matrix> nested(6, Matrix(300, 500));
  pens::parallel_for(6, [&](int64_t i) {
    pens::gemm(nested[static_cast<size_t>(i)].block(0, 0, 300, 500), a, b, false);
  });
  for (const Matrix& m : nested) wrong += !(one == m);
  wrong += concurrent_wrong.load();
  pens::set_threads(1);
  std::printf("stress_parallel: %d wrong results\n", wrong);
  return wrong == 0 ? 0 : 1;
}
