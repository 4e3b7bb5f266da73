// SPDX-License-Identifier: Apache-2.0
// Communicator::create duplicates the caller's MPI communicator and "the
// caller keeps ownership of comm" (communicator.hpp): after create the
// caller may free it, and peerplan must keep working on its own duplicate,
// the fallback included. A library that kept using the caller's handle
// would call MPI on a freed communicator here. A separate binary, because
// such a bug may crash the process and would hide the other tests' results.
#include <mpi.h>

#include <gtest/gtest.h>

#include <vector>

#include "peerplan/communicator.hpp"
#include "support/communicator_test_support.hpp"
#include "support/mpi_test_support.hpp"

namespace peerplan::comm_test {
namespace {

TEST(CommunicatorCommOwnership, CallerMayFreeItsCommAfterCreate) {
  MPI_Comm mine = MPI_COMM_NULL;
  MPI_Comm_dup(test_comm(), &mine);
  Config config;
  config.timeout = std::chrono::milliseconds(5000);
  auto comm = Communicator::create(mine, host_config(config));
  MPI_Comm_free(&mine);  // ours to free: peerplan holds its own duplicate
  ASSERT_EQ(mine, MPI_COMM_NULL);

  const TensorLayout declared{2, 64};
  comm->declare(std::vector<Declaration>{Declaration::all_reduce("ar", DataType::f32, declared)});
  expect_all_reduce_correct(
      run_all_reduce(*comm, DataType::f32, declared, Inputs::integers, false, next_seed()),
      "declared call after the caller freed its comm");
  // Undeclared: the fallback must not use the caller's (freed) handle either.
  const AllReduceOutcome o = run_all_reduce(*comm, DataType::f32, TensorLayout{3, 64},
                                            Inputs::integers, false, next_seed());
  EXPECT_EQ(o.result.route, Route::fallback);
  expect_all_reduce_correct(o, "fallback call after the caller freed its comm");
  comm->close();
}

}  // namespace
}  // namespace peerplan::comm_test
