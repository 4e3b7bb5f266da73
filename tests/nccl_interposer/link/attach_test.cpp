// SPDX-License-Identifier: Apache-2.0
// peerplan's create over a communicator of the fake NCCL (one rank,
// fake_nccl.cpp), through the interposer's ncclCommInitRank: the bootstrap
// over NCCL and the create run for real, so these need a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
#include <string>

#include "nccl_interposer/comm_table.hpp"

namespace peerplan::nccl_interposer {
namespace {

class InterposerAttach : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      cudaGetLastError();
      GTEST_SKIP() << "needs a GPU: peerplan's create over the fake NCCL runs on the device";
    }
    setenv("PEERPLAN_NCCL_LIBRARY", PEERPLAN_FAKE_NCCL, 1);
    setenv("PEERPLAN_NCCL_DECLARE", "f32:1K", 1);
  }
  void TearDown() override {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
    for (const char* name :
         {"PEERPLAN_NCCL_DECLARE", "PEERPLAN_TIMEOUT_MS", "FAKE_NCCL_ALLGATHER_STALL_MS"}) {
      unsetenv(name);
    }
  }
  // The communicator's state once the interposer's init returned.
  std::shared_ptr<CommState> init() {
    ncclUniqueId id{};
    EXPECT_EQ(ncclCommInitRank(&comm_, 1, id, 0), ncclSuccess);
    return find_comm(comm_);
  }
  ncclResult_t async_error() {
    ncclResult_t async = ncclInternalError;
    EXPECT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
    return async;
  }

  ncclComm_t comm_ = nullptr;
};

TEST_F(InterposerAttach, OneRankGivesPeerplanUpWithNcclUntouched) {
  const auto state = init();
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->communicator(), nullptr);
  EXPECT_NE(state->reason.find("peer to peer is disabled"), std::string::npos) << state->reason;
  EXPECT_EQ(async_error(), ncclSuccess);
}

TEST_F(InterposerAttach, ABootstrapTimeoutIsReportedAsTheCommunicatorsAsyncError) {
  // The roll call's allgather never completes in time: NCCL now holds an
  // allgather the other ranks may never match.
  setenv("PEERPLAN_TIMEOUT_MS", "200", 1);
  setenv("FAKE_NCCL_ALLGATHER_STALL_MS", "1000", 1);
  const auto state = init();
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->communicator(), nullptr);
  EXPECT_NE(state->reason.find("did not complete within"), std::string::npos) << state->reason;
  EXPECT_EQ(async_error(), ncclRemoteError);
}

}  // namespace
}  // namespace peerplan::nccl_interposer
