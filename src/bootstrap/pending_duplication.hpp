// SPDX-License-Identifier: Apache-2.0
// The bootstrap's duplication of one user communicator, kept from one create
// to the next when it times out.
//
// Open MPI runs MPI_Comm_idup in rounds, each of which takes the next internal
// tag of the communicator when it starts. Two duplications in progress on one
// communicator, whose rounds start at different times on different ranks (one
// rank was stopped), can take each other's rounds, and then neither completes
// anywhere (seen with Open MPI 4.1: a stopped rank and its peers retrying
// create never met again). So a duplication that timed out is not abandoned:
// the next create on the same communicator waits on it again instead of
// starting another, and every rank has at most one in progress per
// communicator. That also keeps the ranks in step without the user's help:
// a rank starts a duplication only when its previous one completed, which
// needs every rank to have started that one too, so no rank is ever more
// than one duplication ahead, and the rank behind joins the one the others
// are waiting on when it calls create.
//
// Kept in an MPI attribute of the communicator: it lives and dies with it
// (freeing the communicator keeps a duplication still in progress until
// exit, as bounded_dup.hpp does) and is not copied to its duplicates.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>

#include "bootstrap/bounded_dup.hpp"

namespace peerplan::bootstrap::detail {

struct UserCommDuplications {
  std::uint64_t started = 0;           // duplications this rank started (attempt numbers)
  std::optional<Duplication> pending;  // the one in progress, attempt number `started`
};

// The record of `user_comm`, empty on first use. Not thread-safe: MPI
// forbids concurrent collective calls on one communicator anyway.
UserCommDuplications& duplications_of(MPI_Comm user_comm);

}  // namespace peerplan::bootstrap::detail
