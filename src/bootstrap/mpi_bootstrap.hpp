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
// duplication itself cannot tell who is missing. A duplication that timed
// out stays in progress and the next call on `user_comm` waits on it again
// (bootstrap/pending_duplication.hpp): a rank that arrives after the others
// gave up meets them there if they are retrying; if they are not, its
// duplication completes (it matches theirs) and the exchange after it times
// out naming them.
std::unique_ptr<Bootstrap> make_mpi_bootstrap(MPI_Comm user_comm,
                                              std::chrono::milliseconds timeout);

// The private duplicate an MPI bootstrap works on, from which create makes
// the other communicators it needs (the MPI fallback's, the one between
// nodes): so the bootstrap's duplication is the only collective call create
// makes on the user's communicator, and a duplication abandoned there by a
// Timeout (the MPI fallback's, say) cannot get between the ranks' attempts.
// MPI_COMM_NULL for a bootstrap that is not an MPI one.
MPI_Comm private_communicator(const Bootstrap& bootstrap) noexcept;

}  // namespace peerplan::bootstrap
