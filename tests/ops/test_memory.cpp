// pens' memory limit: charges against it, and the buffers that take them (tapes,
// parameter stores, data sets) refused before they are allocated.
#include <doctest/doctest.h>

#include <string>

#include "pens/autodiff/tape.h"
#include "pens/models/dataset.h"
#include "pens/models/mlp.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/ir/memory.h"

namespace test_memory {

using namespace pens;

namespace {

constexpr uint64_t kMiB = 1024 * 1024;

// Sets the limit for one test and puts the previous one back.
struct LimitGuard {
  explicit LimitGuard(uint64_t bytes) : previous(memory_limit()) { set_memory_limit(bytes); }
  ~LimitGuard() { set_memory_limit(previous); }
  uint64_t previous;
};

std::string refusal(const auto& make) {
  try {
    make();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("memory charges add up against the limit, are released, and copies charge again") {
  const uint64_t before = memory_charged();
  LimitGuard limit(before + 10 * kMiB);
  {
    MemoryCharge a(6 * kMiB, "buffer a");
    CHECK(memory_charged() == before + 6 * kMiB);
    const std::string message = refusal([] { MemoryCharge b(5 * kMiB, "buffer b"); });
    CHECK(message.find("buffer b: 5.0 MiB needed beside the ") != std::string::npos);
    CHECK(message.find("more than the memory limit of ") != std::string::npos);
    CHECK(message.find("--memory-limit GB") != std::string::npos);
    CHECK(memory_charged() == before + 6 * kMiB);  // the refused charge took nothing
    CHECK_THROWS_AS(MemoryCharge{a}, Error);         // a copy is a second 6 MiB
    MemoryCharge moved(std::move(a));
    CHECK(moved.bytes() == 6 * kMiB);
    CHECK(a.bytes() == 0);
    CHECK(memory_charged() == before + 6 * kMiB);
  }
  CHECK(memory_charged() == before);
  MemoryCharge fits(9 * kMiB, "after release");
  CHECK(fits.bytes() == 9 * kMiB);
  CHECK(refusal([] { (void)bytes_of(uint64_t{1} << 62, 8, "huge"); }) == "huge: more than 2^64 bytes needed");
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bytes(3 * kMiB / 2) == "1.5 MiB");
}

TEST_CASE("a tape, a parameter store or a data set beyond the memory limit is refused before allocation") {
  const Graph g = build_mlp({.layers = {784, 800, 800, 10}});
  const uint64_t before = memory_charged();
  LimitGuard limit(before + 64 * kMiB);
  ParamStore<float> params(g);  // 1.28 M parameters, values and gradients: 9.7 MiB
  CHECK(memory_charged() > before + 9 * kMiB);
  {
    Tape<float> fits(g, params, {.batch = 100});
  }
  // Batch 100,000 needs gigabytes: refused at once, naming the batch and the sizes.
  const std::string message = refusal([&] { Tape<float> tape(g, params, {.batch = 100000}); });
  INFO(message);
  CHECK(message.find("the tape of a ") != std::string::npos);
  CHECK(message.find("at batch 100000: ") != std::string::npos);
  CHECK(message.find(" GiB needed beside the ") != std::string::npos);
  CHECK(message.find("more than the memory limit of ") != std::string::npos);

  const Graph wide = build_mlp({.layers = {784, 100000, 10}});
  CHECK(refusal([&] { ParamStore<double> p(wide); }).find("the parameters (4 tensors, values and gradients): 1.2 GiB") !=
        std::string::npos);
  CHECK(refusal([] { (void)make_dataset(1000000, 784, 10, "a big set"); })
            .find("a big set (1000000 examples of 784 values): 2.9 GiB needed") != std::string::npos);
  // What was refused holds nothing; what was made and destroyed gave its charge back.
  CHECK(memory_charged() == before + params.values().size() * 2 * sizeof(float));
}

}  // namespace test_memory
