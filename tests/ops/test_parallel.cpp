// The thread pool (ops/parallel.h) and the matrix products built on it (ops/gemm.h).
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "pens/ops/gemm.h"
#include "pens/ops/parallel.h"
#include "tests/support/alloc_counter.h"

namespace test_parallel {

using namespace pens;

namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Restores the thread count a test changed.
struct KeepThreads {
  int saved = threads();
  ~KeepThreads() { set_threads(saved); }
};

// Where gemm's row panel p of `panels` over m rows starts (ops/gemm.cpp: at least 192
// rows a panel, cut on multiples of 16).
int64_t panel_cut(int64_t m, int64_t panels, int64_t p) {
  return p == panels ? m : std::min(m, (m * p / panels + 8) / 16 * 16);
}

// How often each chunk ran.
std::vector<int> run_counts(int64_t chunks) {
  std::vector<std::atomic<int>> counts(static_cast<size_t>(chunks));
  parallel_for(chunks, [&](int64_t c) { counts[static_cast<size_t>(c)].fetch_add(1); });
  std::vector<int> out;
  for (const auto& c : counts) out.push_back(c.load());
  return out;
}

}  // namespace

TEST_CASE("parallel_for runs every chunk exactly once, on any number of threads") {
  KeepThreads keep;
  for (const int n : {1, 2, 3}) {
    set_threads(n);
    CHECK(threads() == n);
    for (const int64_t chunks : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1000}}) {
      INFO(n << " threads, " << chunks << " chunks");
      CHECK(run_counts(chunks) == std::vector<int>(static_cast<size_t>(chunks), 1));
    }
  }
  // Many small jobs back to back: a worker waking late for one job never runs the next
  // job's chunks with the old job's body.
  set_threads(2);
  for (int job = 0; job < 2000; ++job) {
    const std::vector<int> counts = run_counts(job % 5 + 1);
    REQUIRE(counts == std::vector<int>(counts.size(), 1));
  }
}

TEST_CASE("parallel_for inside a chunk, and from two threads at once, runs inline and completes") {
  KeepThreads keep;
  set_threads(2);
  std::atomic<int> inner{0};
  parallel_for(4, [&](int64_t) { parallel_for(5, [&](int64_t) { inner.fetch_add(1); }); });
  CHECK(inner.load() == 20);

  std::atomic<int> total{0};
  auto caller = [&] {
    for (int i = 0; i < 200; ++i) parallel_for(3, [&](int64_t) { total.fetch_add(1); });
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  CHECK(total.load() == 2 * 200 * 3);
}

TEST_CASE("parallel_for's prepare runs once, before any chunk, and says whether the workers join") {
  KeepThreads keep;
  struct Seen {
    int calls = 0;
    bool workers_join = false;
    int64_t chunks_run_before = -1;
  };
  // Runs `chunks` chunks and records what prepare saw; the chunks record the workers that
  // ran them.
  const auto run = [](int64_t chunks, std::vector<int>* workers = nullptr) {
    Seen seen;
    std::atomic<int64_t> done{0};
    parallel_for(
        chunks,
        [&](bool join) {
          ++seen.calls;
          seen.workers_join = join;
          seen.chunks_run_before = done.load();
        },
        [&](int64_t c) {
          if (workers) (*workers)[static_cast<size_t>(c)] = worker_index();
          done.fetch_add(1);
        });
    CHECK(done.load() == chunks);
    return seen;
  };
  set_threads(1);
  Seen one = run(8);
  CHECK(one.calls == 1);
  CHECK_FALSE(one.workers_join);
  CHECK(one.chunks_run_before == 0);

  set_threads(3);
  CHECK(worker_index() == 0);
  CHECK_FALSE(run(1).workers_join);  // one chunk runs inline
  for (int job = 0; job < 200; ++job) {
    std::vector<int> workers(64, -1);
    const Seen many = run(64, &workers);
    REQUIRE(many.calls == 1);
    REQUIRE(many.workers_join);
    REQUIRE(many.chunks_run_before == 0);
    for (const int w : workers) REQUIRE((w >= 0 && w < 3));
  }
  // Inside a chunk the nested call runs inline: the workers may be busy with the outer one.
  std::atomic<int> nested_join{0}, nested_calls{0};
  parallel_for(4, [&](int64_t) {
    parallel_for(
        5,
        [&](bool join) {
          nested_calls.fetch_add(1);
          if (join) nested_join.fetch_add(1);
        },
        [](int64_t) {});
  });
  CHECK(nested_calls.load() == 4);
  CHECK(nested_join.load() == 0);
}

TEST_CASE("the thread count comes from the CPUs this process may use") {
  CHECK(usable_cpus() >= 1);
  CHECK(resolve_threads(0) == usable_cpus());
  CHECK(resolve_threads(3) == 3);
}

TEST_CASE("gemm: Eigen's product, cut in panels, the same bits on 1, 2 and 3 threads") {
  KeepThreads keep;
  struct Case {
    int64_t m, k, n;
    bool ta, tb, accumulate;
  };
  // Shapes cut by columns (n >= m) and by rows, each transpose, both kinds of write, and
  // one small enough to stay whole.
  const std::vector<Case> cases = {{100, 300, 800, false, false, false}, {900, 64, 200, true, false, true},
                                   {128, 800, 784, false, true, true},   {700, 50, 600, true, true, false},
                                   {5, 7, 3, false, false, true}};
  for (const Case& c : cases) {
    INFO(c.m << "x" << c.k << "x" << c.n << " ta=" << c.ta << " tb=" << c.tb << " acc=" << c.accumulate);
    const Matrix a = c.ta ? Matrix::Random(c.k, c.m) : Matrix::Random(c.m, c.k);
    const Matrix b = c.tb ? Matrix::Random(c.n, c.k) : Matrix::Random(c.k, c.n);
    const Matrix start = Matrix::Random(c.m, c.n);
    const auto run = [&](int n) {
      set_threads(n);
      Matrix out = start;
      if (!c.ta && !c.tb) gemm(out.block(0, 0, c.m, c.n), a, b, c.accumulate);
      if (c.ta && !c.tb) gemm(out.block(0, 0, c.m, c.n), a.transpose(), b, c.accumulate);
      if (!c.ta && c.tb) gemm(out.block(0, 0, c.m, c.n), a, b.transpose(), c.accumulate);
      if (c.ta && c.tb) gemm(out.block(0, 0, c.m, c.n), a.transpose(), b.transpose(), c.accumulate);
      return out;
    };
    const Matrix one = run(1), two = run(2), three = run(3);
    CHECK(one == two);
    CHECK(one == three);
    const Matrix product = (c.ta ? Matrix(a.transpose()) : a) * (c.tb ? Matrix(b.transpose()) : b);
    const Matrix want = c.accumulate ? Matrix(start + product) : product;
    CHECK((one - want).cwiseAbs().maxCoeff() <= 1e-4f * std::max(1.0f, want.cwiseAbs().maxCoeff()));
  }
}

// gemm cuts C into pieces along its columns by the thread count (ops/gemm.cpp); that the
// bits stay put rests on Eigen's kernel computing each column the same whichever piece
// holds it, when the cut is at a multiple of its column group. Checked here by computing
// the columns of C in two products, cut at several multiples of 4: C is column-major to
// the kernel, so for a row-major C (the products of the layers) the cut is across its rows.
TEST_CASE("gemm: a product cut into two at a multiple of 4 columns has the bits of the whole") {
  KeepThreads keep;
  set_threads(1);
  using ColMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  struct Case {
    int64_t m, k, n;
  };
  // Row panels (m > n, m ≥ 384) as the layers' products have them, and a panel whole.
  for (const Case& c : std::vector<Case>{{900, 300, 200}, {1000, 784, 160}, {500, 1000, 320}, {250, 250, 161}}) {
    for (const int64_t cut : {4, 64, 80, 124}) {
      INFO(c.m << "x" << c.k << "x" << c.n << " cut " << cut);
      const Matrix a = Matrix::Random(c.m, c.k);
      const ColMatrix b = ColMatrix::Random(c.k, c.n);
      const ColMatrix start = ColMatrix::Random(c.m, c.n);
      ColMatrix whole = start, halves = start;
      gemm(whole, a, b, true);
      gemm(halves.leftCols(cut), a, b.leftCols(cut), true);
      gemm(halves.rightCols(c.n - cut), a, b.rightCols(c.n - cut), true);
      CHECK(whole == halves);
    }
  }
}

// gemm runs each panel through its own copy of Eigen's sequential driver, which packs a
// piece of B once for all the panels a thread computes (ops/gemm.cpp). Each panel must
// still have the bits of Eigen's own product of that panel: checked against
// `noalias() +=` (Eigen's GEMM, sequential in this build) on shapes whose blocking cuts
// the rows (200×200, depth 784), the depth and the columns (depth 1500, 900 columns),
// in float and double, the several panels computed on 1 and 2 threads.
TEST_CASE_TEMPLATE("gemm: each row panel has the bits of Eigen's own product of it", T, float, double) {
  KeepThreads keep;
  using ColMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  struct Case {
    int64_t m, k, n;
  };
  for (const Case& c : std::vector<Case>{{200, 784, 200}, {300, 1500, 900}, {1000, 1500, 300}, {800, 512, 784}}) {
    INFO(c.m << "x" << c.k << "x" << c.n);
    const RowMatrix a = RowMatrix::Random(c.m, c.k);
    const ColMatrix b = ColMatrix::Random(c.k, c.n);
    const ColMatrix start = ColMatrix::Random(c.m, c.n);
    const int64_t panels = std::clamp<int64_t>(c.m / 192, 1, 64);
    ColMatrix want = start;
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t row = panel_cut(c.m, panels, p), height = panel_cut(c.m, panels, p + 1) - row;
      want.middleRows(row, height).noalias() += a.middleRows(row, height) * b;
    }
    for (const int n : {1, 2}) {
      set_threads(n);
      ColMatrix got = start;
      gemm(got, a, b, true);
      CHECK(got == want);
    }
  }
}

// gemm_bias starts C from the bias where Eigen's kernel sums the whole depth in one block
// (depth 784) and adds it after the product where it does not (depth 1500): either way
// the bits of the product followed by the bias added to each row, for a row-major C (the
// layers' case: the kernel sees Cᵀ) and a column-major one.
TEST_CASE("gemm: the bias written before the product has the bits of adding it after") {
  KeepThreads keep;
  using ColMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  for (const int64_t k : {784, 1500}) {
    for (const int n : {1, 2}) {
      INFO("depth " << k << ", " << n << " threads");
      set_threads(n);
      const Matrix x = Matrix::Random(300, k), w = Matrix::Random(k, 800);
      const Eigen::RowVectorXf bias = Eigen::RowVectorXf::Random(800);
      Matrix want(300, 800), got(300, 800);
      gemm(want, x, w, false);
      want.rowwise() += bias;
      gemm_bias(got, x, w, bias.data());
      CHECK(got == want);
      ColMatrix want_cols(300, 800), got_cols(300, 800);
      gemm(want_cols, x, w, false);
      want_cols.rowwise() += bias;
      gemm_bias(got_cols, x, w, bias.data());
      CHECK(got_cols == want_cols);
    }
  }
}

// A thread keeps the piece of B it packed for the other panels of the same product only:
// the next product may read new values at the same address.
TEST_CASE("gemm: a product does not reuse the B packed for the product before it at the same address") {
  KeepThreads keep;
  set_threads(1);
  using ColMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  const Matrix a = Matrix::Random(1000, 300);
  ColMatrix b = ColMatrix::Random(300, 200);
  ColMatrix first(1000, 200), second(1000, 200);
  gemm(first, a, b, false);
  b.array() += 1.0f;
  gemm(second, a, b, false);
  const ColMatrix want = a * b;
  CHECK((second - want).cwiseAbs().maxCoeff() <= 1e-3f);
  CHECK((first - want).cwiseAbs().maxCoeff() > 1.0f);
}

// A product with several row panels against each panel computed alone by Eigen's own
// driver (a panel under 384 rows is one panel, and one thread makes it one piece): the
// same bits on any thread count, whatever pieces the panels are cut into. The row cuts
// below are gemm's: at least 192 rows a panel, on multiples of 16.
TEST_CASE("gemm: a product in row panels and column pieces has the bits of its panels computed alone") {
  KeepThreads keep;
  using ColMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  struct Case {
    int64_t m, k, n;
    bool accumulate;
  };
  // Depth in one block and in two (Eigen cuts k 784 and 1000), a ragged last panel.
  for (const Case& c : std::vector<Case>{{1000, 784, 160, false}, {1000, 320, 320, true}, {500, 1000, 250, true},
                                         {777, 250, 100, false}}) {
    INFO(c.m << "x" << c.k << "x" << c.n << " acc=" << c.accumulate);
    const ColMatrix a = ColMatrix::Random(c.m, c.k), b = ColMatrix::Random(c.k, c.n);
    const ColMatrix start = ColMatrix::Random(c.m, c.n);
    const int64_t panels = std::min(c.m / 192, c.m * c.n * c.k / (int64_t{1} << 18));
    REQUIRE(panels > 1);
    set_threads(1);
    ColMatrix want = start;
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t row = panel_cut(c.m, panels, p), height = panel_cut(c.m, panels, p + 1) - row;
      gemm(want.middleRows(row, height), a.middleRows(row, height), b, c.accumulate);
    }
    for (const int n : {1, 2, 3}) {
      set_threads(n);
      ColMatrix got = start;
      gemm(got, a, b, c.accumulate);
      CHECK(got == want);
    }
  }
}

// The pool's worker is started afresh and left to fall asleep, so that it may wake too late
// for the first run of a small product (four column pieces of 64×64×64) and join only later
// runs; ten times over. Its packing buffers were sized before it could join any task, so no
// run after the first allocates. (When the worker sized its own buffers as it met bigger
// tasks, 3 of 10 runs of this test failed, and tests/autodiff/test_tape.cpp's steady-state
// steps allocated in about 1 run of that test in 40.)
TEST_CASE("gemm: after a product's first run, running it again allocates nothing, whichever thread takes which task") {
  KeepThreads keep;
  using ColMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  const Matrix a = Matrix::Random(64, 64);
  const ColMatrix b = ColMatrix::Random(64, 256);
  ColMatrix c(64, 256);
  if (!testing::CountAllocations::available()) {
    MESSAGE("allocation counting is off under AddressSanitizer");
    return;
  }
  for (int trial = 0; trial < 10; ++trial) {
    set_threads(1);
    set_threads(2);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    gemm(c, a, b, false);
    int64_t allocations = 0;
    {
      const testing::CountAllocations count;
      for (int run = 0; run < 50; ++run) gemm(c, a, b, false);
      allocations = count.count();
    }
    INFO("trial " << trial);
    CHECK(allocations == 0);
  }
}

}  // namespace test_parallel
