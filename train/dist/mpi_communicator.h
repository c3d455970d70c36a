// The Communicator of MPI: the processes `mpirun` (or a cluster's launcher) started. Built
// when meson finds MPI (Debian: libopenmpi-dev); pens without MPI builds and runs on one
// process. Gradients are summed with MPI_Iallreduce, one per parameter, started as the
// backward pass finishes each.
#pragma once

#include <memory>

#include "pens/train/dist/communicator.h"

namespace pens {

// Whether this pens was built with MPI.
bool mpi_available();

// The world of MPI processes when this process was started by an MPI launcher (its
// environment says so), initialized here; null otherwise, and when pens was built without
// MPI. MPI is finalized when the communicator is destroyed.
std::unique_ptr<Communicator> mpi_world();

// Ends every process of the run at once (MPI_Abort): for an error one process met alone,
// which the others, waiting in a collective call, would never learn of.
[[noreturn]] void mpi_abort(int code);

}  // namespace pens
