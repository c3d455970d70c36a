#include "pens/ops/ir/memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>

#include "pens/ops/ir/error.h"

namespace pens {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The memory this process may use: the machine's, or its cgroup's (v2, then v1), or its
// address-space limit (ulimit -v), whichever is smallest. 0 when none can be read.
uint64_t machine_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  uint64_t bytes = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    uint64_t limit = 0;
    if (in >> limit && limit > 0 && (bytes == 0 || limit < bytes)) bytes = limit;  // "max" fails to read
  }
  // An address-space limit counts mappings that are not memory (code, thread stacks), so
  // it is a generous bound; still, past it an allocation fails with no message of pens'.
  rlimit space{};
  if (getrlimit(RLIMIT_AS, &space) == 0 && space.rlim_cur != RLIM_INFINITY) {
    const auto limit = static_cast<uint64_t>(space.rlim_cur);
    if (limit > 0 && (bytes == 0 || limit < bytes)) bytes = limit;
  }
  return bytes;
}

// Where the limit comes from, for the error message.
enum class Origin { Machine, Environment, Caller, Unknown };
std::atomic<Origin> origin{Origin::Unknown};

std::string origin_text() {
  switch (origin.load()) {
    case Origin::Machine: return cat("90% of the ", format_bytes(machine_memory()), " this process may use");
    case Origin::Environment: return "PENS_MEMORY_LIMIT";
    case Origin::Caller: return "set by the caller";
    case Origin::Unknown: break;
  }
  return "this machine's memory could not be read";
}

std::atomic<uint64_t>& limit_bytes() {
  static std::atomic<uint64_t> limit = [] {
    if (const char* env = std::getenv("PENS_MEMORY_LIMIT")) {
      char* end = nullptr;
      const double gb = std::strtod(env, &end);
      if (end == env || *end != '\0' || !(gb > 0) || gb > 1e9) {
        fail("PENS_MEMORY_LIMIT='", env, "' is not a memory size in GiB (a number above 0)");
      }
      origin = Origin::Environment;
      return static_cast<uint64_t>(gb * kGiB);
    }
    const uint64_t machine = machine_memory();
    if (machine == 0) return std::numeric_limits<uint64_t>::max();
    origin = Origin::Machine;
    return machine / 10 * 9;
  }();
  return limit;
}

std::atomic<uint64_t> charged{0};

}  // namespace

uint64_t memory_limit() { return limit_bytes().load(); }

void set_memory_limit(uint64_t bytes) {
  limit_bytes().store(bytes);
  origin = Origin::Caller;
}

uint64_t memory_charged() { return charged.load(); }

std::string format_bytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  char text[32];
  if (b >= kGiB) {
    std::snprintf(text, sizeof text, "%.1f GiB", b / kGiB);
  } else if (b >= 1024.0 * 1024.0) {
    std::snprintf(text, sizeof text, "%.1f MiB", b / (1024.0 * 1024.0));
  } else if (b >= 1024.0) {
    std::snprintf(text, sizeof text, "%.1f KiB", b / 1024.0);
  } else {
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  }
  return text;
}

MemoryCharge::MemoryCharge(uint64_t bytes, const std::string& what) {
  const uint64_t limit = memory_limit();
  uint64_t held = charged.load();
  do {
    if (bytes > limit || held > limit - bytes) {
      fail(what, ": ", format_bytes(bytes), " needed", held ? cat(" beside the ", format_bytes(held), " pens holds already") : "",
           ", more than the memory limit of ", format_bytes(limit), " (", origin_text(),
           "); raise it with --memory-limit GB or PENS_MEMORY_LIMIT=GB, or make the batch or the layers smaller");
    }
  } while (!charged.compare_exchange_weak(held, held + bytes));
  bytes_ = bytes;
}

MemoryCharge::MemoryCharge(const MemoryCharge& other)
    : MemoryCharge(other.bytes_, "a copy of " + format_bytes(other.bytes_)) {}

MemoryCharge& MemoryCharge::operator=(const MemoryCharge& other) {
  if (this != &other) *this = MemoryCharge(other);
  return *this;
}

MemoryCharge& MemoryCharge::operator=(MemoryCharge&& other) noexcept {
  if (this != &other) {
    release();
    bytes_ = other.bytes_;
    other.bytes_ = 0;
  }
  return *this;
}

void MemoryCharge::release() noexcept {
  if (bytes_) charged.fetch_sub(bytes_);
  bytes_ = 0;
}

uint64_t bytes_of(uint64_t elements, uint64_t element_size, const std::string& what) {
  if (element_size && elements > std::numeric_limits<uint64_t>::max() / element_size) {
    fail(what, ": more than 2^64 bytes needed");
  }
  return elements * element_size;
}

}  // namespace pens
