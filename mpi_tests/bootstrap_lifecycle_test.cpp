// SPDX-License-Identifier: Apache-2.0
// The bootstrap before MPI_Init and after MPI_Finalize: one process that
// walks through MPI's whole lifetime, so it has its own main (gtest_main)
// instead of the MPI test harness, which initialises MPI before any test.
#include <mpi.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "bootstrap/mpi_bootstrap.hpp"
#include "peerplan/errors.hpp"

namespace {

using peerplan::bootstrap::make_mpi_bootstrap;
using namespace std::chrono_literals;

std::string usage_error() {
  try {
    make_mpi_bootstrap(MPI_COMM_SELF, 1000ms);
  } catch (const peerplan::InvalidUsage& e) {
    return e.what();
  }
  return "";
}

TEST(BootstrapLifecycle, RefusesToRunOutsideMpiInitAndFinalize) {
  const std::string before = usage_error();
  EXPECT_NE(before.find("call MPI_Init"), std::string::npos) << before;

  int provided = 0;
  ASSERT_EQ(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SINGLE, &provided), MPI_SUCCESS);
  auto survivor = make_mpi_bootstrap(MPI_COMM_SELF, 1000ms);
  {
    auto bootstrap = make_mpi_bootstrap(MPI_COMM_SELF, 1000ms);
    EXPECT_EQ(bootstrap->size(), 1);
    EXPECT_EQ(bootstrap->rank(), 0);
    EXPECT_EQ(bootstrap->local_size(), 1);
    EXPECT_EQ(bootstrap->num_nodes(), 1);
    EXPECT_TRUE(bootstrap->agree(true));
    EXPECT_FALSE(bootstrap->agree(false));
    EXPECT_EQ(bootstrap->allgather({}).size(), 1u);
  }  // destroyed while MPI runs: frees its communicators
  ASSERT_EQ(MPI_Finalize(), MPI_SUCCESS);

  const std::string after = usage_error();
  EXPECT_NE(after.find("already been finalised"), std::string::npos) << after;
  // A bootstrap that outlives MPI_Finalize is destroyed without touching MPI.
  survivor.reset();
}

}  // namespace
