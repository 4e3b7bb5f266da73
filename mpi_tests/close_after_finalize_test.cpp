// SPDX-License-Identifier: Apache-2.0
// close() after MPI_Finalize: it must refuse with InvalidUsage instead of
// calling MPI (which aborts the process), and the destructor must still
// release the rank's resources quietly. Its own main: the MPI test harness
// finalises MPI itself.
#include <mpi.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "peerplan/peerplan.hpp"

namespace {

TEST(CloseAfterFinalize, RaisesInvalidUsageAndTheDestructorStillRuns) {
  int provided = 0;
  ASSERT_EQ(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SINGLE, &provided), MPI_SUCCESS);
  peerplan::Config config;
  config.backend = peerplan::Backend::host;
  auto comm = peerplan::Communicator::create(MPI_COMM_WORLD, config);
  comm->declare(std::vector<peerplan::Declaration>{
      peerplan::Declaration::all_reduce("x", peerplan::DataType::f32, {1, 64})});
  ASSERT_EQ(MPI_Finalize(), MPI_SUCCESS);

  std::string message;
  try {
    comm->close();
  } catch (const peerplan::InvalidUsage& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("finalised"), std::string::npos) << "close() raised: '" << message << "'";
  comm.reset();  // local work only: must neither call MPI nor abort
}

}  // namespace
