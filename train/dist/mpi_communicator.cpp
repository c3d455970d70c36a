#include "pens/train/dist/mpi_communicator.h"

#include <cstdlib>
#include <vector>

#include "pens/ops/ir/error.h"

#ifdef PENS_HAVE_MPI
#include <mpi.h>
#endif

namespace pens {

namespace {

// What launchers set: Open MPI's mpirun, PMIx, and the PMI of MPICH, Slurm and Hydra.
bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(name)) return true;
  }
  return false;
}

#ifdef PENS_HAVE_MPI

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail(call, " failed: ", std::string(text, static_cast<size_t>(length)));
}

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator() {
    int provided = 0;
    // Only the main thread calls MPI; the kernels' pool threads never do.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    // Errors come back as codes (check() turns them into pens::Error) instead of aborting.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiCommunicator() override {
    if (!pending_.empty()) MPI_Waitall(static_cast<int>(pending_.size()), pending_.data(), MPI_STATUSES_IGNORE);
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void sum(std::span<double> values) override {
    check(MPI_Allreduce(MPI_IN_PLACE, values.data(), count(values.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
          "MPI_Allreduce");
  }
  void start_sum(std::span<float> values) override {
    if (size_ == 1 || values.empty()) return;
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, values.data(), count(values.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                         &request),
          "MPI_Iallreduce");
    pending_.push_back(request);
  }
  void progress() override {
    if (pending_.empty()) return;
    int done = 0;
    check(MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
  }
  void finish_sums() override {
    if (pending_.empty()) return;
    check(MPI_Waitall(static_cast<int>(pending_.size()), pending_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
    pending_.clear();
  }
  void gather(std::span<const float> mine, std::span<float> all) override {
    if (all.size() != mine.size() * static_cast<size_t>(size_)) fail("gather: ", all.size(), " places for ", size_, " x ", mine.size());
    check(MPI_Allgather(mine.data(), count(mine.size()), MPI_FLOAT, all.data(), count(mine.size()), MPI_FLOAT,
                        MPI_COMM_WORLD),
          "MPI_Allgather");
  }
  uint64_t broadcast(uint64_t value) override { return broadcast_from(0, value); }
  std::string first_problem(const std::string& problem) override {
    int from = problem.empty() ? size_ : rank_;
    check(MPI_Allreduce(MPI_IN_PLACE, &from, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    if (from == size_) return "";
    std::string text = from == rank_ ? cat("process ", rank_, ": ", problem) : std::string();
    text.resize(broadcast_from(from, text.size()));
    check(MPI_Bcast(text.data(), count(text.size()), MPI_CHAR, from, MPI_COMM_WORLD), "MPI_Bcast");
    return text;
  }

 private:
  static int count(uint64_t n) {
    if (n > static_cast<uint64_t>(INT32_MAX)) fail("an MPI message of ", n, " elements is beyond MPI's int counts");
    return static_cast<int>(n);
  }
  uint64_t broadcast_from(int root, uint64_t value) {
    check(MPI_Bcast(&value, 1, MPI_UINT64_T, root, MPI_COMM_WORLD), "MPI_Bcast");
    return value;
  }

  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> pending_;
};

#endif

}  // namespace

#ifdef PENS_HAVE_MPI

bool mpi_available() { return true; }

std::unique_ptr<Communicator> mpi_world() {
  if (!launched_by_mpi()) return nullptr;
  return std::make_unique<MpiCommunicator>();
}

void mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

#else

bool mpi_available() { return false; }

std::unique_ptr<Communicator> mpi_world() {
  if (launched_by_mpi()) {
    fail("started by an MPI launcher, but this pens was built without MPI: install libopenmpi-dev and rebuild "
         "(scripts/setup.sh does both)");
  }
  return nullptr;
}

void mpi_abort(int code) { std::_Exit(code); }

#endif

}  // namespace pens
