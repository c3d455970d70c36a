#include <doctest/doctest.h>

#include <Eigen/Core>
#include <algorithm>
#include <thread>

#include "pens/autodiff/arena_cache.h"
#include "pens/autodiff/tape.h"
#include "pens/models/mlp.h"
#include "pens/ops/parallel.h"
#include "tests/support/alloc_counter.h"
#include "tests/support/helpers.h"

namespace test_tape {

using namespace pens;

namespace {
Graph tiny_mlp(double dropout = 0.0) {
  return build_mlp({.layers = {5, 4, 4, 3}, .input_dropout = dropout, .hidden_dropout = dropout});
}

void fill_inputs(Tape<float>& tape) {
  auto x = tape.input("x");
  for (int64_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  auto y = tape.input("y");
  for (int64_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 3);
}
// tiny_mlp with the parameters of seed 2, run forward at batch 4 on fill_inputs' rows.
struct TinyForward {
  Graph g = tiny_mlp();
  ParamStore<float> params{g};
  Tape<float> tape{g, params, {.batch = 4}};
  TinyForward() {
    params.initialize(g, 2);
    fill_inputs(tape);
    tape.forward();
  }
};
}  // namespace

TEST_CASE("tape forward computes the MLP that Eigen computes directly") {
  const Graph g = tiny_mlp();
  ParamStore<float> params(g);
  params.initialize(g, 3);
  // Larger weights than the paper's init, so that every layer matters.
  for (float& w : params.values()) w *= 30.0f;
  Tape<float> tape(g, params, {.batch = 6});
  fill_inputs(tape);
  tape.forward();

  using M = Eigen::MatrixXf;
  auto mat = [&](const char* name) -> M { return params.value(name).mat(); };
  auto vec = [&](const char* name) -> Eigen::RowVectorXf { return params.value(name).mat(1, params.value(name).size()); };
  M h = tape.value("x").mat();
  h = ((h * mat("W1")).rowwise() + vec("b1")).cwiseMax(0.0f);
  h = ((h * mat("W2")).rowwise() + vec("b2")).cwiseMax(0.0f);
  const M logits = (h * mat("W3")).rowwise() + vec("b3");
  const M got = tape.value("logits").mat();
  CHECK((got - logits).cwiseAbs().maxCoeff() < 1e-5f);

  double xent = 0;
  for (int r = 0; r < 6; ++r) {
    const double lse = std::log(logits.row(r).array().exp().sum());
    xent += lse - logits(r, r % 3);
  }
  CHECK(tape.objective() == doctest::Approx(xent / 6).epsilon(1e-5));
}

namespace {
struct StepRun {
  int64_t allocations = 0;
  int64_t live_bytes = 0;
};
// Five training steps (new noise each) on a compiled tape, counting heap traffic.
StepRun count_steps(Tape<float>& tape, ParamStore<float>& params) {
  testing::CountAllocations counter;
  for (uint64_t step = 0; step < 5; ++step) {
    tape.set_noise_key({1, step});
    params.zero_grad();
    tape.forward();
    tape.backward();
  }
  return {counter.count(), counter.live_bytes()};
}
}  // namespace

TEST_CASE("a tape compiled after another is destroyed starts from zeros, as on a new arena") {
  // Arenas of destroyed tapes are reused (a graph compiled per example, a tree each, would
  // otherwise take fresh pages every time); whatever the last tape left in one must not show.
  const Graph g = build_mlp({.layers = {16, 32, 3}, .hidden_dropout = 0.5});
  ParamStore<float> params(g);
  params.initialize(g, 1);
  {
    Tape<float> used(g, params, {.batch = 8});
    fill_inputs(used);
    used.forward();
    used.backward();
    CHECK(used.value("logits").arr().abs().sum() > 0);
    CHECK(used.grad("h1").arr().abs().sum() > 0);
  }
  for (const int64_t batch : {8, 4, 64}) {
    CAPTURE(batch);
    Tape<float> next(g, params, {.batch = batch});
    for (const char* name : {"x", "h1", "logits", "loss"}) {
      CAPTURE(name);
      CHECK(next.value(name).arr().abs().sum() == 0);
      if (next.grad(name).data) CHECK(next.grad(name).arr().abs().sum() == 0);
    }
  }
}

TEST_CASE("a cached arena goes to a tape only when it is at most twice the size asked for") {
  // A tape keeps its arena while it lives: a small tape that took a forest's arena of tens
  // of megabytes kept it, and a tree run's memory grew with every evaluation. On a thread
  // of its own, whose cache starts empty.
  std::thread([] {
    using Cache = ArenaCache<float>;
    constexpr size_t kLarge = size_t{1} << 22;  // 16 MB, given back
    Cache::give_back(Cache::Buffer(kLarge, 1.0f));
    const Cache::Buffer small = Cache::zeros(1000);
    CHECK(small.capacity() <= 2000);
    const Cache::Buffer reused = Cache::zeros(kLarge * 3 / 4);
    CHECK(reused.capacity() == kLarge);
    CHECK(std::all_of(reused.begin(), reused.end(), [](float x) { return x == 0.0f; }));
  }).join();
}

TEST_CASE("the arena is allocated once: steady-state steps allocate nothing and buffers stay put") {
  // Dropout included: masks live in scratch memory planned at compile time.
  const Graph g = build_mlp({.layers = {64, 128, 128, 10}, .input_dropout = 0.2, .hidden_dropout = 0.5});
  ParamStore<float> params(g);
  params.initialize(g, 1);
  Tape<float> tape(g, params, {.batch = 32});
  fill_inputs(tape);
  const float* arena = tape.arena_data();
  const float* logits = tape.value("logits").data;
  const float* grad_w1 = tape.grad("W1").data;
  const int saved_threads = threads();

  // One thread: not a single allocation in five steps.
  set_threads(1);
  tape.forward();  // lets anything lazily initialized settle
  tape.backward();
  const StepRun single = count_steps(tape, params);
  if (!testing::CountAllocations::available()) {
    MESSAGE("allocation counting is off under AddressSanitizer; only buffer addresses are checked");
  } else {
    CHECK(single.allocations == 0);
  }

  // Two threads: the pool hands out work without allocating either.
  set_threads(2);
  tape.forward();
  tape.backward();
  const StepRun parallel = count_steps(tape, params);
  CHECK(parallel.live_bytes == 0);
  if (testing::CountAllocations::available()) CHECK(parallel.allocations == 0);
  set_threads(saved_threads);

  CHECK(tape.arena_data() == arena);
  CHECK(tape.value("logits").data == logits);
  CHECK(tape.grad("W1").data == grad_w1);
  CHECK(tape.grad("W1").data == params.grad("W1").data);  // gradients land in the store
}

TEST_CASE("parameter gradients accumulate across backward passes until zeroed") {
  TinyForward run;
  ParamStore<float>& params = run.params;
  Tape<float>& tape = run.tape;
  tape.backward();
  const std::vector<float> once(params.grads().begin(), params.grads().end());
  tape.backward();
  for (size_t i = 0; i < once.size(); ++i) CHECK(params.grads()[i] == doctest::Approx(2 * once[i]));
  params.zero_grad();
  for (float gr : params.grads()) CHECK(gr == 0.0f);
  CHECK(std::any_of(once.begin(), once.end(), [](float v) { return v != 0.0f; }));
}

TEST_CASE("two tapes share one parameter store") {
  const Graph g = tiny_mlp();
  ParamStore<float> params(g);
  params.initialize(g, 2);
  Tape<float> small(g, params, {.batch = 2});
  Tape<float> large(g, params, {.batch = 8});
  fill_inputs(small);
  fill_inputs(large);
  small.forward();
  const float before = small.value("logits")[0];
  params.value("b3")[0] += 1.0f;  // one update, seen by both tapes
  small.forward();
  large.forward();
  CHECK(small.value("logits")[0] == doctest::Approx(before + 1.0f));
  CHECK(large.value("logits")[0] == doctest::Approx(before + 1.0f));
}

TEST_CASE("frozen parameters get no gradient; the rest still do") {
  Graph g = tiny_mlp();
  g.set_flag(g.at("W1"), kFrozen);
  ParamStore<float> params(g);
  params.initialize(g, 2);
  Tape<float> tape(g, params, {.batch = 4});
  fill_inputs(tape);
  tape.forward();
  tape.backward();
  CHECK_FALSE(tape.grad("W1"));
  CHECK(params.grad("W1").arr().abs().sum() == 0.0f);
  CHECK(params.grad("W2").arr().abs().sum() > 0.0f);
}

TEST_CASE("several loss nodes add up into the objective") {
  Graph g;
  const NodeId w = g.param("w", {3}, {{"init", std::string("constant")}, {"value", 2.0}});
  const NodeId a = g.add("sum", {w}, {}, "a");
  const NodeId b = g.add("sum", {g.add("square", {w})}, {}, "b");
  g.set_flag(a, kLoss);
  g.set_flag(b, kLoss);
  ParamStore<double> params(g);
  params.initialize(g, 0);
  Tape<double> tape(g, params);
  tape.forward();
  CHECK(tape.objective() == doctest::Approx(6.0 + 12.0));
  tape.backward();
  for (int i = 0; i < 3; ++i) CHECK(params.grad("w")[i] == doctest::Approx(1.0 + 4.0));
}

TEST_CASE("tape errors name what is wrong") {
  const Graph g = tiny_mlp();
  ParamStore<float> params(g);
  Tape<float> tape(g, params, {.batch = 2});
  CHECK_ERROR_MENTIONS(tape.input("nope"), "no node named 'nope'");
  CHECK_ERROR_MENTIONS(tape.input("W1"), "'W1' is a parameter");
  std::vector<float> seed(3);
  CHECK_ERROR_MENTIONS(tape.backward_from("logits", seed), "seed for 'logits' has 3 elements", "6");

  const Graph other = build_mlp({.layers = {5, 7, 3}});
  CHECK_ERROR_MENTIONS(Tape<float>(other, params), "parameter 'W1'", "[5,7]", "[5,4]");
  ParamStore<float> empty;
  CHECK_ERROR_MENTIONS(Tape<float>(g, empty), "parameter 'W1' is not in the parameter store");
}

TEST_CASE("parameter initialization follows the init attributes and is order-independent") {
  const Graph g = build_mlp({.layers = {200, 300, 10}});
  ParamStore<float> a(g), b(g);
  a.initialize(g, 9);
  b.initialize(g, 9);
  CHECK(std::equal(a.values().begin(), a.values().end(), b.values().begin()));
  ParamStore<float> c(g);
  c.initialize(g, 10);
  CHECK(a.value("W1")[0] != c.value("W1")[0]);

  const auto w = a.value("W1").arr();
  const double mean = w.mean();
  const double sd = std::sqrt((w - static_cast<float>(mean)).square().mean());
  CHECK(std::abs(mean) < 1e-3);
  CHECK(sd == doctest::Approx(0.01).epsilon(0.02));
  CHECK(a.value("b1").arr().minCoeff() == 0.1f);
  CHECK(a.value("b2").arr().maxCoeff() == 0.0f);

  // The same parameter in a graph declared in another order gets the same values.
  Graph reordered;
  reordered.param("W1", {200, 300}, {{"init", std::string("normal")}, {"std", 0.01}});
  reordered.param("zzz", {4});
  ParamStore<float> r(reordered);
  r.initialize(reordered, 9);
  CHECK(std::equal(w.begin(), w.end(), r.value("W1").arr().begin()));
  CHECK(a.numel() == 200 * 300 + 300 + 300 * 10 + 10);
}

TEST_CASE("first_non_finite names the op that made the first bad value, after a bad input") {
  Graph g;
  const NodeId x = g.input("x", {kBatch, 3});
  const NodeId y = g.add("log", {x}, {}, "y");
  g.set_flag(g.add("exp", {y}, {}, "z"), kOutput);
  ParamStore<float> params(g);
  Tape<float> tape(g, params, {.batch = 2});
  auto in = tape.input("x");
  for (int64_t i = 0; i < in.size(); ++i) in[i] = 1.0f + static_cast<float>(i);
  tape.forward();
  CHECK(tape.first_non_finite() == "");
  in[4] = -1.0f;  // log(-1) is NaN, and exp passes it on
  tape.forward();
  CHECK(tape.first_non_finite() == "'y' (log)");
  in[4] = std::numeric_limits<float>::infinity();
  tape.forward();
  CHECK(tape.first_non_finite() == "'x' (input)");
}

TEST_CASE("a tape whose rows are placed in a global batch draws what the global batch draws there") {
  Graph g;
  const NodeId x = g.input("x", {kBatch, 6});
  const NodeId dropped = g.add("dropout", {x}, {{"p", 0.5}}, "dropped");
  g.add("gaussian_noise", {dropped}, {{"sigma", 0.3}}, "noisy");
  // Rows 2.. only, as graph/passes/restrict_rows.cpp computes a child on unlabeled rows.
  const NodeId tail = g.add("slice", {x}, {{"axis", int64_t{0}}, {"begin", int64_t{2}}}, "tail");
  g.add("dropout", {tail}, {{"p", 0.5}, {"row_offset", int64_t{2}}}, "tail_dropped");
  // Noise on a parameter has no batch rows: every process draws all of it.
  g.add("gaussian_noise", {g.param("W", {3, 6}, {{"init", std::string("constant")}, {"value", 1.0}})},
        {{"sigma", 0.3}}, "fuzzed");
  ParamStore<float> params(g);
  params.initialize(g, 1);
  const auto row_value = [](int64_t row, int64_t col) { return 1.0f + static_cast<float>(row * 6 + col); };

  Tape<float> whole(g, params, {.batch = 8});
  for (int64_t r = 0; r < 8; ++r) {
    for (int64_t c = 0; c < 6; ++c) whole.input("x")[r * 6 + c] = row_value(r, c);
  }
  // A shard of rows 2, 3 (two labeled rows, say) and 6, 7 (two unlabeled rows).
  Tape<float> shard(g, params, {.batch = 4});
  shard.set_row_placement({{.local = 0, .global = 2, .count = 2}, {.local = 2, .global = 6, .count = 2}});
  const std::vector<int64_t> global_row{2, 3, 6, 7};
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t c = 0; c < 6; ++c) shard.input("x")[r * 6 + c] = row_value(global_row[static_cast<size_t>(r)], c);
  }
  for (uint64_t step : {1, 2}) {
    whole.set_noise_key({5, step});
    shard.set_noise_key({5, step});
    whole.forward();
    shard.forward();
    for (int64_t r = 0; r < 4; ++r) {
      const int64_t gr = global_row[static_cast<size_t>(r)];
      for (int64_t c = 0; c < 6; ++c) {
        REQUIRE(shard.value("dropped")[r * 6 + c] == whole.value("dropped")[gr * 6 + c]);
        REQUIRE(shard.value("noisy")[r * 6 + c] == whole.value("noisy")[gr * 6 + c]);
      }
    }
    // The shard's tail is its rows 2, 3: global rows 6, 7, the whole tail's rows 4, 5.
    for (int64_t i = 0; i < 12; ++i) REQUIRE(shard.value("tail_dropped")[i] == whole.value("tail_dropped")[24 + i]);
    for (int64_t i = 0; i < 18; ++i) REQUIRE(shard.value("fuzzed")[i] == whole.value("fuzzed")[i]);
  }
  // Without the placement the shard draws rows 0..3 of the global draw: different noise.
  Tape<float> unplaced(g, params, {.batch = 4});
  for (int64_t i = 0; i < 24; ++i) unplaced.input("x")[i] = shard.input("x")[i];
  unplaced.set_noise_key({5, 2});
  unplaced.forward();
  bool differs = false;
  for (int64_t i = 0; i < 24; ++i) differs = differs || unplaced.value("noisy")[i] != shard.value("noisy")[i];
  CHECK(differs);
}

TEST_CASE("a row placement must cover the tape's rows once, in order") {
  const Graph g = tiny_mlp(0.5);
  ParamStore<float> params(g);
  Tape<float> tape(g, params, {.batch = 4});
  CHECK_THROWS_WITH(tape.set_row_placement({{.local = 0, .global = 0, .count = 3}}),
                    "a row placement covers 3 rows; the tape's batch is 4");
  CHECK_THROWS_WITH(tape.set_row_placement({{.local = 0, .global = 0, .count = 2}, {.local = 3, .global = 9, .count = 1}}),
                    doctest::Contains("a run {local 3, global 9, count 1} follows row 1"));
  CHECK_THROWS_WITH(tape.set_row_placement({{.local = 0, .global = -1, .count = 4}}),
                    doctest::Contains("cover the tape's rows 0..3 once"));
  tape.set_row_placement({{.local = 0, .global = 10, .count = 1}, {.local = 1, .global = 0, .count = 3}});
}

TEST_CASE("backward reports each parameter's gradient once, as soon as it is complete") {
  TinyForward run;
  ParamStore<float>& params = run.params;
  Tape<float>& tape = run.tape;
  std::vector<std::string> order;
  std::vector<std::vector<float>> at_report;
  tape.set_gradient_ready([&](std::span<float> grad) {
    for (const ParamEntry& e : params.entries()) {
      if (params.grad(e).data == grad.data()) {
        CHECK(static_cast<int64_t>(grad.size()) == e.shape.numel());
        order.push_back(e.name);
      }
    }
    at_report.emplace_back(grad.begin(), grad.end());
  });
  tape.backward();
  // Every parameter once, the output layer's before the first layer's.
  REQUIRE(order.size() == params.entries().size());
  const auto position = [&](const std::string& n) { return std::find(order.begin(), order.end(), n) - order.begin(); };
  for (const ParamEntry& e : params.entries()) CHECK(std::count(order.begin(), order.end(), e.name) == 1);
  CHECK(position("W3") < position("W2"));
  CHECK(position("W2") < position("W1"));
  // What was reported is the final gradient: nothing added to it afterwards.
  for (size_t i = 0; i < order.size(); ++i) {
    const TensorView<float> final_grad = params.grad(order[i]);
    CHECK(std::equal(at_report[i].begin(), at_report[i].end(), final_grad.data));
  }
}

TEST_CASE("node gradients start from zero in every backward pass, after backward_from too") {
  // The tape zeroes each stretch of gradient memory just before its first writer
  // (Tape::backward). A product pair that runs stacked, a node read by three
  // instructions (twice by one), two losses.
  Graph g;
  const NodeId w = g.param("W", {4, 4}, {{"init", std::string("normal")}, {"std", 0.5}});
  const NodeId p1 = g.add("matmul", {g.input("a", {kBatch, 4}), w}, {}, "p1");
  const NodeId p2 = g.add("matmul", {g.input("b", {kBatch, 4}), w}, {}, "p2");
  const NodeId s = g.add("add", {g.add("mul", {p1, p1}, {}, "q"), g.add("relu", {p2}, {}, "r")}, {}, "s");
  g.set_flag(g.add("sum", {g.add("square", {s}, {}, "sq")}, {}, "loss1"), kLoss);
  g.set_flag(g.add("sum", {g.add("sub", {p1, p2}, {}, "t")}, {}, "loss2"), kLoss);
  ParamStore<float> params(g);
  params.initialize(g, 4);
  const auto make = [&] {
    auto tape = std::make_unique<Tape<float>>(g, params, CompileOptions{.batch = 3});
    for (const char* name : {"a", "b"}) {
      auto in = tape->input(name);
      for (int64_t i = 0; i < in.size(); ++i) in[i] = std::sin(0.7f * static_cast<float>(i) + (name[0] == 'a' ? 0.1f : 0.9f));
    }
    tape->forward();
    return tape;
  };
  const std::vector<std::string> nodes = {"p1", "p2", "q", "r", "s", "sq", "t"};
  const auto grads = [&](const Tape<float>& t) {
    std::vector<float> out;
    for (const std::string& n : nodes) {
      const auto gr = t.grad(n);
      REQUIRE(gr.data);
      out.insert(out.end(), gr.data, gr.data + gr.size());
    }
    return out;
  };
  const auto tape = make();
  CHECK(tape->stacks() == std::vector<std::vector<std::string>>{{"p1", "p2"}});
  tape->backward();
  const std::vector<float> first = grads(*tape);
  CHECK(std::any_of(first.begin(), first.end(), [](float x) { return x != 0.0f; }));
  tape->backward();
  CHECK(grads(*tape) == first);

  const std::vector<float> seed(12, 1.0f);
  tape->backward_from("s", seed);
  const auto fresh = make();
  fresh->backward_from("s", seed);
  CHECK(grads(*tape) == grads(*fresh));
  CHECK(grads(*tape) != first);

  tape->backward();
  CHECK(grads(*tape) == first);
}

}  // namespace test_tape
