// SPDX-License-Identifier: Apache-2.0
// The MPI implementation of the bootstrap.
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>

#include "bootstrap/bootstrap.hpp"

namespace peerplan::bootstrap {

// Collective over `user_comm` (an intracommunicator; never MPI_COMM_WORLD
// unless that is what the caller passes). Works on a private duplicate of it
// (MPI_Comm_idup: the only collective call on `user_comm`), so the
// application's messages on `user_comm`, whatever their tags, never meet the
// bootstrap's. Ranks share a node when their node keys match
// (detail::node_key: host name and boot id); local rank 0 is the node's
// lowest rank and node ids are numbered in the order of each node's lowest
// rank. Every wait of the construction and of every collective of the result
// is bounded by `timeout`; nothing in it is an unbounded MPI collective. The
// duplicate is freed by the destructor (a local operation).
//
// Throws InvalidUsage if MPI is not initialised or already finalised, or if
// MPI_COMM_WORLD has one rank while the launcher started several processes
// (see check_launch); InvalidArgument for MPI_COMM_NULL, an
// intercommunicator or a non-positive timeout; MpiError when MPI fails;
// Timeout when some rank does not join within `timeout`: naming the ranks
// missing from the exchanges after the duplication, and saying that the
// duplication itself cannot tell who is missing. A rank that arrives after
// the others gave up times out too (its duplication matches theirs, the
// exchange after it names them); then every rank has made the same calls
// on `user_comm` and a new bootstrap on every rank works.
std::unique_ptr<Bootstrap> make_mpi_bootstrap(MPI_Comm user_comm,
                                              std::chrono::milliseconds timeout);

}  // namespace peerplan::bootstrap
