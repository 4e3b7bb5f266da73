// SPDX-License-Identifier: Apache-2.0
// peerplan's create over a communicator of the fake NCCL (one rank,
// fake_nccl.cpp), through the interposer's ncclCommInitRank: the bootstrap
// over NCCL, its roll call and the create run for real, so these need a
// GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "bootstrap/nccl_bootstrap.hpp"
#include "nccl_interposer/comm_table.hpp"
#include "nccl_interposer/real_nccl.hpp"
#include "peerplan/errors.hpp"
#include "fake_nccl_record.hpp"

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

TEST_F(InterposerAttach, DestroyAfterABootstrapTimeoutAbortsTheCommunicator) {
  // NCCL still holds the stalled all-gather: its destroy would wait for it.
  setenv("PEERPLAN_TIMEOUT_MS", "200", 1);
  setenv("FAKE_NCCL_ALLGATHER_STALL_MS", "1000", 1);
  const auto state = init();
  ASSERT_NE(state, nullptr);
  EXPECT_TRUE(state->out_of_step);
  fake_nccl_calls();
  EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
  comm_ = nullptr;
  EXPECT_EQ(fake_nccl_calls(), "CommAbort\n");
}

TEST_F(InterposerAttach, ARankWithNothingDeclaredStillTakesTheRollCall) {
  // Its peers may have declared sizes and be waiting in the bootstrap's
  // exchanges: it answers them (one byte: nothing declared) instead of
  // leaving their all-gathers queued on the application's communicator.
  unsetenv("PEERPLAN_NCCL_DECLARE");
  fake_nccl_calls();
  const auto state = init();
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->communicator(), nullptr);
  EXPECT_NE(state->reason.find("nothing is declared"), std::string::npos) << state->reason;
  const std::string calls = fake_nccl_calls();
  EXPECT_NE(calls.find("AllGather 1\n"), std::string::npos) << calls;
  EXPECT_EQ(async_error(), ncclSuccess);
}

TEST_F(InterposerAttach, TheBootstrapsTeardownAfterATimeoutDoesNotWaitForTheStalledExchange) {
  init();
  ASSERT_NE(comm_, nullptr);
  // The stalled all-gather holds the bootstrap's stream far longer than the
  // timeout: freeing its buffers (cudaFree synchronizes) would wait for it.
  setenv("FAKE_NCCL_ALLGATHER_STALL_MS", "4000", 1);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(bootstrap::make_nccl_bootstrap(comm_, bootstrap_functions(real_nccl()),
                                              std::chrono::milliseconds(200)),
               Timeout);
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  EXPECT_LT(waited.count(), 2000) << "the failed bootstrap's teardown waited for the stall";
}

}  // namespace
}  // namespace peerplan::nccl_interposer
