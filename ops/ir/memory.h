// pens' memory limit: every large buffer (a tape's arena, a parameter store, an optimizer's
// state, a data set) is charged against one process-wide limit before it is allocated,
// so a batch or a width that would need more than the machine has is refused at once with
// a message naming the size, the limit and how to raise it, instead of running into
// std::bad_alloc or the kernel's OOM killer minutes later.
//
// The limit defaults to 90% of the machine's memory (or of the cgroup's limit, when the
// process runs in a smaller one); PENS_MEMORY_LIMIT=GB in the environment or
// set_memory_limit() (pens --memory-limit GB) replaces it.
#pragma once

#include <cstdint>
#include <string>

namespace pens {

uint64_t memory_limit();
void set_memory_limit(uint64_t bytes);
// Bytes held by live charges.
uint64_t memory_charged();
// "1.5 GiB", "800.0 MiB", "12 B".
std::string format_bytes(uint64_t bytes);

// A charge of `bytes` against the limit, held while the buffer it stands for lives. Taking
// one that would put the total over the limit throws an Error naming `what`. A copy
// charges again (the copied buffer is a new allocation); a move hands the charge on.
class MemoryCharge {
 public:
  MemoryCharge() = default;
  MemoryCharge(uint64_t bytes, const std::string& what);
  MemoryCharge(const MemoryCharge& other);
  MemoryCharge& operator=(const MemoryCharge& other);
  MemoryCharge(MemoryCharge&& other) noexcept : bytes_(other.bytes_) { other.bytes_ = 0; }
  MemoryCharge& operator=(MemoryCharge&& other) noexcept;
  ~MemoryCharge() { release(); }

  uint64_t bytes() const { return bytes_; }

 private:
  void release() noexcept;
  uint64_t bytes_ = 0;
};

// The bytes of `elements` values of `element_size` bytes, or an Error naming `what` when
// the product does not fit in 64 bits.
uint64_t bytes_of(uint64_t elements, uint64_t element_size, const std::string& what);

}  // namespace pens
