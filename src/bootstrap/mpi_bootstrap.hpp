// The MPI implementation of the bootstrap.
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>

#include "bootstrap/bootstrap.hpp"

namespace peerplan::bootstrap {

// Collective over `user_comm` (an intracommunicator; never MPI_COMM_WORLD
// unless that is what the caller passes). Works on a private duplicate of it,
// so the application's messages on `user_comm`, whatever their tags, never
// meet the bootstrap's. Local ranks come from MPI_Comm_split_type(SHARED);
// node ids are numbered in the order of each node's lowest rank. Every
// collective of the result, and the duplication itself, waits at most
// `timeout`. The communicators are freed by the destructor.
//
// Throws InvalidUsage if MPI is not initialised or already finalised, or if
// MPI_COMM_WORLD has one rank while the launcher started several processes
// (see check_launch); InvalidArgument for MPI_COMM_NULL, an
// intercommunicator or a non-positive timeout; MpiError when MPI fails;
// Timeout when some rank does not join within `timeout`.
std::unique_ptr<Bootstrap> make_mpi_bootstrap(MPI_Comm user_comm,
                                              std::chrono::milliseconds timeout);

}  // namespace peerplan::bootstrap
