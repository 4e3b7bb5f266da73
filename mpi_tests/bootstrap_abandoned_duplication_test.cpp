// SPDX-License-Identifier: Apache-2.0
// A communicator with a duplication of it in progress that a Timeout gave up
// on is never freed (bootstrap/bounded_dup.hpp): Open MPI crashes when the
// duplication goes on after its parent was freed and new communicators are
// made. Rank 0 alone starts the duplication, gives up and releases the
// parent (it must keep it); the others join the duplication late, then every
// rank works on new communicators.
#include <mpi.h>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "bootstrap/bounded_dup.hpp"
#include "bootstrap/mpi_bootstrap.hpp"
#include "bootstrap/owned_comm.hpp"
#include "peerplan/errors.hpp"
#include "support/mpi_test_support.hpp"

namespace peerplan::mpi_test {
namespace {

using namespace std::chrono_literals;

int test_rank() { return world_rank(); }
int test_size() { return world_size(); }

// New communicators made after the release carry correct sums.
void expect_new_communicators_work() {
  for (int i = 0; i < 3; ++i) {
    MPI_Comm fresh = MPI_COMM_NULL;
    ASSERT_EQ(MPI_Comm_dup(test_comm(), &fresh), MPI_SUCCESS);
    int mine = test_rank() + 1;
    int sum = 0;
    ASSERT_EQ(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, fresh), MPI_SUCCESS);
    EXPECT_EQ(sum, test_size() * (test_size() + 1) / 2);
    MPI_Comm_free(&fresh);
  }
}

// Rank 0 gave up on duplicating `parent` and released it; the others join
// that duplication late, then every rank makes new communicators.
void others_join_late(MPI_Comm parent) {
  if (test_rank() != 0) {
    MPI_Comm late = MPI_COMM_NULL;
    ASSERT_NO_THROW(late = bootstrap::duplicate_within(parent, 20s, "joining late"));
    MPI_Comm_free(&late);
  }
  expect_new_communicators_work();
}

TEST(AbandonedDuplication, KeepsItsParentOwnedCommAlive) {
  MPI_Comm parent = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_dup(test_comm(), &parent), MPI_SUCCESS);
  MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
  auto owned = bootstrap::OwnedComm::adopt(parent);
  if (test_rank() == 0) {
    EXPECT_THROW((void)bootstrap::duplicate_within(parent, 200ms, "test"), Timeout);
    EXPECT_TRUE(bootstrap::duplication_in_progress_on(parent));
    owned.reset();  // must keep it: the others are yet to join
  }
  meet_or_abort("after rank 0 released the parent");
  others_join_late(parent);
  meet_or_abort("after the new communicators");
  if (test_rank() == 0) {
    EXPECT_FALSE(bootstrap::duplication_in_progress_on(parent));
    // The released OwnedComm kept it for good; now that the duplication is
    // over, the test may free it (LeakSanitizer counts it otherwise).
    MPI_Comm_free(&parent);
  }
  owned.reset();
}

TEST(AbandonedDuplication, KeepsTheBootstrapsCommunicatorAlive) {
  auto boot = bootstrap::make_mpi_bootstrap(test_comm(), 10s);
  const MPI_Comm own = bootstrap::private_communicator(*boot);
  ASSERT_NE(own, MPI_COMM_NULL);
  if (test_rank() == 0) {
    // As create does with the fallback's communicator when a peer is late.
    EXPECT_THROW((void)bootstrap::duplicate_within(own, 200ms, "test"), Timeout);
    EXPECT_TRUE(bootstrap::duplication_in_progress_on(own));
    boot.reset();  // must keep its communicator: the others are yet to join
  }
  meet_or_abort("after rank 0 destroyed its bootstrap");
  others_join_late(own);
  meet_or_abort("after the new communicators");
  if (test_rank() == 0) EXPECT_FALSE(bootstrap::duplication_in_progress_on(own));
}

}  // namespace
}  // namespace peerplan::mpi_test
