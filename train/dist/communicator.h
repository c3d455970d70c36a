// The processes of a data-parallel run, and what they do together. Each process computes
// the gradient of its shard of a global batch; the Step sums the gradients here before
// the optimizer runs, so every process applies the same update to the same parameters.
//
// pens' own implementation is MPI's (train/dist/mpi_communicator.h, built when meson finds
// MPI); a program may bring another (NCCL, a test's threads) by implementing this class.
// Every call is collective: each process makes the same calls in the same order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "pens/ops/ir/error.h"

namespace pens {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;  // this process, 0 .. size() - 1
  virtual int size() const = 0;  // the processes of the run

  // Element-wise sums over the processes, in place; every process receives the same sum.
  virtual void sum(std::span<double> values) = 0;
  // Starts summing `values` in place in the background (a parameter's gradient while the
  // backward pass goes on); finish_sums() waits for all started and progress() lets them
  // advance. `values` must stay alive and untouched until finish_sums() returns.
  virtual void start_sum(std::span<float> values) = 0;
  virtual void progress() = 0;
  virtual void finish_sums() = 0;
  // Every process's `mine` (all of one size), in process order, into `all` (size() times
  // as long), on every process.
  virtual void gather(std::span<const float> mine, std::span<float> all) = 0;
  // Process 0's value, on every process.
  virtual uint64_t broadcast(uint64_t value) = 0;
  // The problem of the lowest-numbered process whose `problem` is not empty, prefixed with
  // "process R: ", on every process; "" when no process has one. How one process's error
  // (bad data, a NaN) stops all of them at the same point instead of leaving the others
  // waiting.
  virtual std::string first_problem(const std::string& problem) = 0;
};

// Process `rank`'s share of n things (rows of an evaluation set, trees of a step):
// [n rank / P, n (rank + 1) / P), so that the shares of P processes cover 0 .. n - 1 in order.
struct Share {
  size_t first = 0, end = 0;
};
inline Share share_of(size_t n, int rank, int processes) {
  const auto r = static_cast<size_t>(rank), p = static_cast<size_t>(processes);
  return {n * r / p, n * (r + 1) / p};
}

// A problem every process of a run agreed on (Communicator::first_problem): each of them
// throws it, process 0 reports it, and all end normally.
class CollectiveError : public Error {
 public:
  using Error::Error;
};

// Runs `part` on this process, then has every process learn whether any of them failed:
// a pens::Error in one is thrown on all as a CollectiveError naming that process. For the
// stages of a run that may fail on one process alone (reading its data, setting up).
template <class Part>
void together(Communicator& communicator, const Part& part) {
  std::string problem;
  try {
    part();
  } catch (const Error& e) {
    problem = e.what();
  }
  if (std::string first = communicator.first_problem(problem); !first.empty()) throw CollectiveError(first);
}

}  // namespace pens
