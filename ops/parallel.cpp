#include "pens/ops/parallel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace pens {

namespace {

// Set while a thread runs chunks: a parallel_for inside a chunk runs inline.
thread_local bool t_in_chunk = false;
// worker_index(): set once by each pool worker.
thread_local int t_worker_index = 0;

// How long a thread polls before it sleeps, whether a worker waiting for the next job or
// the caller waiting for the workers to finish. Jobs follow each other within tens of
// microseconds in a step, and waking a sleeping thread costs about as much; beyond this a
// waiting thread sleeps, so it never holds a core that another process needs for long.
// Polling that yields the core at every turn (sched_yield) measured worse under
// contention than this short spin: a yielding thread loses its place to the busy process
// and comes back late (docs/performance-history.md).
constexpr auto kPoll = std::chrono::microseconds(50);
// A worker waiting for the next job then goes on polling for this long, yielding its
// core at every turn, before it sleeps. A step's kernels are often further apart than
// kPoll (one-thread work between them: small ops, the optimizer's bookkeeping), and a
// worker asleep by then joins the next job late; a yielding worker gives its core to any
// other process that wants it. The caller never yields: a job's end waits on it.
// docs/performance-history.md has the figures, alone and beside a busy core.
constexpr auto kWorkerYield = std::chrono::microseconds(1000);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins for kPoll, then yields for `yield`; returns whether `ready` came true.
template <class Ready>
bool poll(const Ready& ready, std::chrono::microseconds yield = std::chrono::microseconds(0)) {
  auto until = std::chrono::steady_clock::now() + kPoll;
  do {
    if (ready()) return true;
    cpu_relax();
  } while (std::chrono::steady_clock::now() < until);
  for (until += yield; std::chrono::steady_clock::now() < until; sched_yield()) {
    if (ready()) return true;
  }
  return ready();
}

// One job at a time: its chunks are handed out by `next_`; the caller runs chunks too
// and then waits until the workers that joined the job have left it.
class Pool {
 public:
  ~Pool() { resize(1); }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void resize(int n) {
    if (n == size()) return;
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
    stop_ = false;
    for (int i = 1; i < n; ++i) {
      workers_.emplace_back([this, i] {
        t_worker_index = i;
        work();
      });
    }
  }

  // Returns false when the pool is in use (a call from another thread): the caller then
  // runs the chunks itself.
  bool run(int64_t chunks, detail::ChunkFn fn, const void* body, detail::PrepareFn prepare,
           const void* prepare_arg) {
    std::unique_lock entry(entry_, std::try_to_lock);
    if (!entry.owns_lock()) return false;
    // Workers that woke for the previous job after its chunks were gone may still be
    // inside it; its fields must not change under them. Workers enter a job under the
    // mutex, so once it is held with none inside, none can enter the old job any more.
    {
      std::unique_lock lock = wait_idle();
      if (prepare) {
        // A parallel_for inside prepare runs inline (this thread holds the pool); the flag
        // is cleared however prepare ends (it may throw: an allocation).
        struct Inline {
          Inline() { t_in_chunk = true; }
          ~Inline() { t_in_chunk = false; }
        } in_prepare;
        prepare(prepare_arg, true);
      }
      fn_ = fn;
      body_ = body;
      chunks_ = chunks;
      next_.store(0, std::memory_order_relaxed);
      generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
    wake_.notify_all();
    take_chunks(fn, body, chunks);
    wait_idle();
    return true;
  }

 private:
  void take_chunks(detail::ChunkFn fn, const void* body, int64_t chunks) {
    t_in_chunk = true;
    // acq_rel: a worker's entry into the job (active_) happens before its chunk is taken,
    // so the caller, once it has seen every chunk taken, also sees that worker active
    // and waits for it.
    for (int64_t c; (c = next_.fetch_add(1, std::memory_order_acq_rel)) < chunks;) fn(body, c);
    t_in_chunk = false;
  }

  // Returns holding the mutex, with no worker inside a job.
  std::unique_lock<std::mutex> wait_idle() {
    const auto idle = [&] { return active_.load(std::memory_order_acquire) == 0; };
    poll(idle);
    std::unique_lock lock(mutex_);
    idle_.wait(lock, idle);
    return lock;
  }

  void work() {
    uint64_t seen = generation_.load(std::memory_order_acquire);
    for (;;) {
      poll([&] { return generation_.load(std::memory_order_acquire) != seen; }, kWorkerYield);
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
      if (stop_) return;
      // The job's fields and its generation are read together, under the lock.
      seen = generation_.load(std::memory_order_relaxed);
      active_.fetch_add(1, std::memory_order_relaxed);
      const detail::ChunkFn fn = fn_;
      const void* body = body_;
      const int64_t chunks = chunks_;
      lock.unlock();
      take_chunks(fn, body, chunks);
      lock.lock();
      if (active_.fetch_sub(1, std::memory_order_release) == 1) idle_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex entry_;  // held by the thread whose job runs
  std::mutex mutex_;  // guards the job's fields, stop_, and changes of active_
  std::condition_variable wake_, idle_;
  bool stop_ = false;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_{0};  // workers inside the current job
  detail::ChunkFn fn_ = nullptr;
  const void* body_ = nullptr;
  int64_t chunks_ = 0;
  std::atomic<int64_t> next_{0};
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

int resolve_threads(int n) { return n > 0 ? n : usable_cpus(); }

std::string threads_text(int n) {
  const int threads = resolve_threads(n);
  return std::to_string(threads) + (threads == 1 ? " thread" : " threads");
}

void set_threads(int n) { pool().resize(resolve_threads(n)); }

int threads() { return pool().size(); }

int worker_index() { return t_worker_index; }

namespace detail {

void run_chunks(int64_t chunks, ChunkFn fn, const void* body, PrepareFn prepare, const void* prepare_arg) {
  if (chunks <= 0) return;
  if (chunks == 1 || t_in_chunk || pool().size() == 1 || !pool().run(chunks, fn, body, prepare, prepare_arg)) {
    if (prepare) prepare(prepare_arg, false);
    for (int64_t c = 0; c < chunks; ++c) fn(body, c);
  }
}

}  // namespace detail

}  // namespace pens
