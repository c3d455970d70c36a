#include "tests/support/alloc_counter.h"

#include <malloc.h>

#include <atomic>
#include <cerrno>
#include <cstddef>

namespace {
std::atomic<bool> armed{false};
std::atomic<int64_t> allocations{0};
std::atomic<int64_t> live{0};

#if PENS_COUNT_ALLOCATIONS
inline void* noted(void* p) {
  if (p && armed.load(std::memory_order_relaxed)) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    live.fetch_add(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  }
  return p;
}
inline void forget(void* p) {
  if (p && armed.load(std::memory_order_relaxed)) {
    live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  }
}
#endif
}  // namespace

#if PENS_COUNT_ALLOCATIONS
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);

void* malloc(size_t n) { return noted(__libc_malloc(n)); }
void* calloc(size_t n, size_t size) { return noted(__libc_calloc(n, size)); }
void* realloc(void* p, size_t n) {
  forget(p);
  return noted(__libc_realloc(p, n));
}
void* memalign(size_t alignment, size_t n) { return noted(__libc_memalign(alignment, n)); }
void* aligned_alloc(size_t alignment, size_t n) { return noted(__libc_memalign(alignment, n)); }
int posix_memalign(void** out, size_t alignment, size_t n) {
  *out = noted(__libc_memalign(alignment, n));
  return *out ? 0 : ENOMEM;
}
void free(void* p) {
  forget(p);
  __libc_free(p);
}
}
#endif

namespace pens::testing {

CountAllocations::CountAllocations() {
  allocations.store(0);
  live.store(0);
  armed.store(true);
}
CountAllocations::~CountAllocations() { armed.store(false); }
int64_t CountAllocations::count() const { return allocations.load(); }
int64_t CountAllocations::live_bytes() const { return live.load(); }

}  // namespace pens::testing
