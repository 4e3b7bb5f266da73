// SPDX-License-Identifier: Apache-2.0
// Tests of the MPI test harness itself (mpi_test_main.cpp).
//
// Run plainly, every test here passes. With PEERPLAN_MPI_SELFTEST_BREAK=1 the
// tests misbehave on purpose (fail on the last rank only, skip on one rank
// only); the ctest registrations with that variable check that the harness
// then fails the test on every rank, prints the failing rank's message on
// rank 0, and exits non-zero. With PEERPLAN_MPI_SELFTEST_BREAK=hang the last
// rank stays in a test far longer than the harness's synchronisation
// timeout, which must abort the job naming the test.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "support/mpi_test_support.hpp"

namespace {

using peerplan::mpi_test::world_rank;
using peerplan::mpi_test::world_size;

std::string break_mode() {
  const char* value = std::getenv("PEERPLAN_MPI_SELFTEST_BREAK");
  return value != nullptr ? value : "";
}
bool breaking() { return break_mode() == "1"; }

TEST(MpiHarness, EveryRankRunsTheTest) {
  EXPECT_GE(world_size(), 1);
  EXPECT_TRUE(peerplan::mpi_test::all_ranks(true));
  EXPECT_TRUE(peerplan::mpi_test::any_rank(world_rank() == 0));
  EXPECT_FALSE(peerplan::mpi_test::all_ranks(world_rank() != 0));
}

TEST(MpiHarness, FailureOnLastRankOnly) {
  const bool fail_here = breaking() && world_rank() == world_size() - 1;
  EXPECT_FALSE(fail_here) << "deliberate failure on the last rank";
}

TEST(MpiHarness, SkipOnLastRankOnly) {
  if (breaking() && world_rank() == world_size() - 1) GTEST_SKIP() << "deliberate lone skip";
  SUCCEED();
}

TEST(MpiHarness, CollectiveSkipIsFine) {
  PEERPLAN_MPI_SKIP_IF(world_rank() == 0, "skipped on every rank because rank 0 asked");
  ADD_FAILURE() << "PEERPLAN_MPI_SKIP_IF did not skip on rank " << world_rank();
}

TEST(MpiHarness, LastRankHangs) {
  if (break_mode() == "hang" && world_rank() == world_size() - 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60));
  }
  SUCCEED();
}

}  // namespace
