// SPDX-License-Identifier: Apache-2.0
// Helpers for MPI tests (linked through peerplan_mpi_test_main).
//
// A test runs on every rank at once and the listener in mpi_test_main.cpp
// merges the ranks' verdicts, so any decision that changes what a test does
// (skip it, take a branch with collectives in it) must be the same on every
// rank: take it through all_ranks()/any_rank(), never from local state alone.
#pragma once

#include <mpi.h>

#include <gtest/gtest.h>

#include <chrono>

namespace peerplan::mpi_test {

// Rank and size in MPI_COMM_WORLD.
int world_rank();
int world_size();
// The thread level MPI_Init_thread granted.
int thread_level();

// Collective over MPI_COMM_WORLD (on a private duplicate, so the tests' own
// traffic on MPI_COMM_WORLD is never matched by it).
bool all_ranks(bool value);
bool any_rank(bool value);

// The tests' own communicator for synchronising and comparing ranks (a
// duplicate of MPI_COMM_WORLD), created by main() right after MPI_Init and
// freed before MPI_Finalize (which does not free communicators: a leak
// checker would report it).
MPI_Comm test_comm();

// A barrier on `comm` (default: test_comm()) with a bound: where the code
// under test hangs on some rank, the others abort the job naming the step
// (`where`) instead of waiting in MPI_Barrier until ctest's timeout (the
// harness bounds only its own synchronisation after each test).
void meet_or_abort(const char* where, MPI_Comm comm = MPI_COMM_NULL,
                   std::chrono::seconds bound = std::chrono::seconds(40));

}  // namespace peerplan::mpi_test

// Skips the current test on every rank when `condition` holds on any rank.
// Must be reached by every rank (like any collective).
#define PEERPLAN_MPI_SKIP_IF(condition, reason)                                                 \
  do {                                                                                          \
    if (::peerplan::mpi_test::any_rank(static_cast<bool>(condition))) GTEST_SKIP() << (reason); \
  } while (false)
