// SPDX-License-Identifier: Apache-2.0
// ncclCommFinalize and ncclCommDestroy of a communicator where peerplan's
// bootstrap left NCCL an all-gather that never completes (a peer skipped
// the exchange or never reached it): NCCL's finalize and destroy would wait
// for it forever, so the interposer aborts the real communicator instead.
// An init whose exchange failed or timed out also reports ncclRemoteError
// as the communicator's asynchronous error; one whose create failed with
// every exchange complete leaves NCCL alone. The interposer's init runs
// for real over the fake NCCL, with a stand-in bootstrap whose exchanges
// are the fake's all-gathers and a stand-in peerplan communicator whose
// close ends with the bootstrap's barrier, as peerplan's does. No GPU.
#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "nccl_interposer/comm_table.hpp"
#include "peerplan/errors.hpp"
#include "fake_nccl_record.hpp"
#include "stand_in_communicator.hpp"

namespace peerplan::nccl_interposer {
namespace {

using Clock = std::chrono::steady_clock;

// Rank 0 of 2, the other rank answering as this one does. Each exchange is
// one ncclAllGather of the fake NCCL; as in the bootstrap over NCCL, one the
// fake never completes throws Timeout at the deadline, one NCCL refuses
// throws NcclError, and after either every later exchange throws
// InvalidUsage without reaching NCCL. `exchange_when_made`: one exchange in
// the constructor, as the bootstrap over NCCL exchanges the node keys.
class AllGatherBootstrap final : public bootstrap::Bootstrap {
 public:
  AllGatherBootstrap(ncclComm_t comm, const bootstrap::NcclFunctions& nccl,
                     std::chrono::milliseconds timeout, bool exchange_when_made)
      : comm_(comm), nccl_(nccl), timeout_(timeout) {
    if (exchange_when_made) allgather({});
  }
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 2; }
  int local_rank() const noexcept override { return 0; }
  int local_size() const noexcept override { return 2; }
  int node_id() const noexcept override { return 0; }
  int num_nodes() const noexcept override { return 1; }
  std::vector<bootstrap::Blob> allgather(std::span<const std::byte> mine) override {
    if (out_of_step_) throw InvalidUsage("stand-in bootstrap: an earlier exchange failed");
    out_of_step_ = true;  // until this one completes
    const int pending = fake_nccl_pending(comm_);
    if (nccl_.all_gather(nullptr, nullptr, mine.size(), ncclUint8, comm_, nullptr) != ncclSuccess) {
      throw NcclError("stand-in bootstrap: ncclAllGather failed");
    }
    const auto deadline = Clock::now() + timeout_;
    while (fake_nccl_pending(comm_) > pending) {
      if (Clock::now() >= deadline) throw Timeout("stand-in bootstrap: an all-gather timed out");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    out_of_step_ = false;
    return {bootstrap::Blob(mine.begin(), mine.end()), bootstrap::Blob(mine.begin(), mine.end())};
  }
  std::vector<bootstrap::Blob> local_allgather(std::span<const std::byte> mine) override {
    return allgather(mine);
  }
  bootstrap::Blob broadcast(std::span<const std::byte> blob, int root) override {
    return allgather(blob).at(static_cast<std::size_t>(root));
  }
  void barrier() override { allgather({}); }
  bool agree(bool ok) override {
    const std::byte mine{static_cast<unsigned char>(ok ? 1 : 0)};
    for (const bootstrap::Blob& blob : allgather({&mine, 1})) {
      if (blob.size() != 1 || blob[0] != std::byte{1}) return false;
    }
    return true;
  }

 private:
  ncclComm_t comm_;
  bootstrap::NcclFunctions nccl_;
  std::chrono::milliseconds timeout_;
  bool out_of_step_ = false;
};

// As peerplan's close(): its last step is the bootstrap's barrier, whose
// timeout it only warns of.
class ClosingPeerplan final : public StandInCommunicator {
 public:
  explicit ClosingPeerplan(std::unique_ptr<bootstrap::Bootstrap> boot) : boot_(std::move(boot)) {}
  void close() override {
    try {
      boot_->barrier();
    } catch (const Timeout&) {
      // peerplan's close: "peers did not reach close()"
    }
  }

 private:
  std::unique_ptr<bootstrap::Bootstrap> boot_;
};

class InterposerTeardown : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("PEERPLAN_NCCL_LIBRARY", PEERPLAN_FAKE_NCCL, 0);
    setenv("PEERPLAN_NCCL_DECLARE", "f32:1K", 1);
    setenv("PEERPLAN_TIMEOUT_MS", "100", 1);
    unsetenv("PEERPLAN_PLAN_FILE");
    set_bootstrap_maker(
        [this](ncclComm_t comm, const bootstrap::NcclFunctions& nccl,
               std::chrono::milliseconds timeout) -> std::unique_ptr<bootstrap::Bootstrap> {
          return std::make_unique<AllGatherBootstrap>(comm, nccl, timeout, exchange_when_made_);
        });
    set_communicator_maker([this](std::unique_ptr<bootstrap::Bootstrap> boot,
                                  Config) -> std::unique_ptr<Communicator> {
      if (create_fails_) throw InvalidArgument("stand-in create: fails on this rank");
      // Made, then NCCL refuses the final agreement's all-gather.
      if (agreement_fails_) fake_nccl_fail_all_gathers(ncclSystemError);
      return std::make_unique<ClosingPeerplan>(std::move(boot));
    });
  }
  void TearDown() override {
    fake_nccl_hang_all_gathers(false);
    fake_nccl_fail_all_gathers(ncclSuccess);
    set_bootstrap_maker({});
    set_communicator_maker({});
    if (comm_ != nullptr) take_comm(comm_);
    for (const char* name : {"PEERPLAN_NCCL_DECLARE", "PEERPLAN_TIMEOUT_MS"}) unsetenv(name);
  }
  // The interposer's init; the record is cleared after it.
  std::shared_ptr<CommState> init() {
    ncclUniqueId id{};
    EXPECT_EQ(ncclCommInitRank(&comm_, 2, id, 0), ncclSuccess);
    fake_nccl_calls();
    return find_comm(comm_);
  }
  // What the program's watchdog would read.
  ncclResult_t async_error() {
    ncclResult_t async = ncclInternalError;
    EXPECT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
    return async;
  }

  ncclComm_t comm_ = nullptr;
  bool exchange_when_made_ = false;  // the stand-in bootstrap's
  bool create_fails_ = false;        // the stand-in create throws, exchanging nothing
  bool agreement_fails_ = false;     // the stand-in create makes NCCL refuse all-gathers
};

TEST_F(InterposerTeardown, PeerplanServesTheCommunicatorOverTheStandIns) {
  const auto state = init();
  ASSERT_NE(state, nullptr);
  EXPECT_NE(state->communicator(), nullptr) << state->reason;
  EXPECT_FALSE(state->out_of_step);
}

TEST_F(InterposerTeardown, WithNothingPendingFinalizeAndDestroyAreNcclsOwn) {
  ASSERT_NE(init(), nullptr);
  EXPECT_EQ(ncclCommFinalize(comm_), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "AllGather 0\nCommFinalize\n");
  EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "CommDestroy\n");
}

TEST_F(InterposerTeardown, WithNothingPendingDestroyIsNcclsOwn) {
  ASSERT_NE(init(), nullptr);
  EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "AllGather 0\nCommDestroy\n");
}

// A peer that skipped its close (it saw a timeout) or died: this rank's
// close barrier never completes.
TEST_F(InterposerTeardown, DestroyAfterACloseThatTimedOutAbortsInstead) {
  ASSERT_NE(init(), nullptr);
  fake_nccl_hang_all_gathers(true);
  EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "AllGather 0 (never completes)\nCommAbort\n");
  EXPECT_EQ(find_comm(comm_), nullptr);
}

TEST_F(InterposerTeardown, FinalizeAfterACloseThatTimedOutAbortsAndALaterDestroyLeavesNcclAlone) {
  ASSERT_NE(init(), nullptr);
  fake_nccl_hang_all_gathers(true);
  EXPECT_EQ(ncclCommFinalize(comm_), ncclRemoteError);
  EXPECT_EQ(fake_nccl_calls(), "AllGather 0 (never completes)\nCommAbort\n");
  const std::string error = ncclGetLastError(comm_);
  EXPECT_NE(error.find("ncclCommFinalize aborted the communicator instead of finalizing it"),
            std::string::npos)
      << error;
  // The handle is freed: answered without NCCL (whose fake says ncclSuccess).
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
  EXPECT_EQ(async, ncclRemoteError);
  EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "");
  EXPECT_EQ(find_comm(comm_), nullptr);
}

TEST_F(InterposerTeardown, AnAbortAfterAFinalizeThatAbortedLeavesNcclAlone) {
  ASSERT_NE(init(), nullptr);
  fake_nccl_hang_all_gathers(true);
  EXPECT_EQ(ncclCommFinalize(comm_), ncclRemoteError);
  EXPECT_EQ(fake_nccl_calls(), "AllGather 0 (never completes)\nCommAbort\n");
  EXPECT_EQ(ncclCommAbort(comm_), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "");
  EXPECT_EQ(find_comm(comm_), nullptr);
}

TEST_F(InterposerTeardown, TheAbortInsteadIsWarnedOfOncePerCommunicator) {
  ASSERT_NE(init(), nullptr);
  fake_nccl_hang_all_gathers(true);
  testing::internal::CaptureStderr();
  EXPECT_EQ(ncclCommFinalize(comm_), ncclRemoteError);
  EXPECT_EQ(ncclCommFinalize(comm_), ncclRemoteError) << "a second finalize";
  EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
  const std::string log = testing::internal::GetCapturedStderr();
  const std::string warning = "aborts the NCCL communicator instead";
  const auto first = log.find(warning);
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find(warning, first + 1), std::string::npos) << log;
  EXPECT_EQ(fake_nccl_calls(), "AllGather 0 (never completes)\nCommAbort\n");
}

// The roll call, create's first exchange, times out: no peerplan, but the
// all-gather stays queued in NCCL all the same.
TEST_F(InterposerTeardown, DestroyAfterATimeoutInCreateAbortsInstead) {
  fake_nccl_hang_all_gathers(true);
  const auto state = init();
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->communicator(), nullptr);
  EXPECT_TRUE(state->out_of_step);
  EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "CommAbort\n");
}

// An exchange of create fails without a timeout (NCCL refuses this rank's
// all-gather): the other rank may hold an all-gather this one never
// matched, so NCCL's operations on the communicator are out of step as
// after a timeout. The program is told (ncclCommGetAsyncError), and
// destroy aborts.
TEST_F(InterposerTeardown, AFailedExchangeInCreateSetsTheAsyncErrorAndDestroyAbortsInstead) {
  fake_nccl_fail_all_gathers(ncclSystemError);
  testing::internal::CaptureStderr();
  const auto state = init();
  const std::string log = testing::internal::GetCapturedStderr();
  fake_nccl_fail_all_gathers(ncclSuccess);
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->communicator(), nullptr);
  EXPECT_NE(state->reason.find("ncclAllGather failed"), std::string::npos) << state->reason;
  EXPECT_TRUE(state->out_of_step);
  EXPECT_NE(log.find("an exchange over the NCCL communicator failed or timed out"),
            std::string::npos)
      << log;
  EXPECT_EQ(async_error(), ncclRemoteError);
  EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "CommAbort\n");
  EXPECT_EQ(find_comm(comm_), nullptr);
}

// The same in the exchange the bootstrap over NCCL makes as it is made
// (the node keys), before the interposer holds the bootstrap.
TEST_F(InterposerTeardown, AFailedExchangeWhileTheBootstrapIsMadeSetsTheAsyncError) {
  exchange_when_made_ = true;
  fake_nccl_fail_all_gathers(ncclSystemError);
  const auto state = init();
  fake_nccl_fail_all_gathers(ncclSuccess);
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->communicator(), nullptr);
  EXPECT_NE(state->reason.find("ncclAllGather failed"), std::string::npos) << state->reason;
  EXPECT_TRUE(state->out_of_step);
  EXPECT_EQ(async_error(), ncclRemoteError);
  EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "CommAbort\n");
}

// Create succeeded, but NCCL refuses the final agreement's all-gather.
TEST_F(InterposerTeardown, AFailedFinalAgreementSetsTheAsyncError) {
  agreement_fails_ = true;
  const auto state = init();
  fake_nccl_fail_all_gathers(ncclSuccess);
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->communicator(), nullptr);
  EXPECT_NE(state->reason.find("the final agreement failed"), std::string::npos) << state->reason;
  EXPECT_TRUE(state->out_of_step);
  EXPECT_EQ(async_error(), ncclRemoteError);
  EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "CommAbort\n");
}

// A create that fails on this rank without a failed exchange: the final
// agreement is still made, the ranks stay in step, and NCCL keeps the
// communicator as it is (no asynchronous error, its own destroy).
TEST_F(InterposerTeardown, ACreateThatFailsWithoutAFailedExchangeLeavesNcclInStep) {
  create_fails_ = true;
  EXPECT_EQ(ncclCommInitRank(&comm_, 2, ncclUniqueId{}, 0), ncclSuccess);
  // The roll call, then the final agreement.
  EXPECT_EQ(fake_nccl_calls(), "CommInitRank 0\nCommUserRank\nAllGather 1\nAllGather 1\n");
  const auto state = find_comm(comm_);
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->communicator(), nullptr);
  EXPECT_NE(state->reason.find("stand-in create"), std::string::npos) << state->reason;
  EXPECT_FALSE(state->out_of_step);
  EXPECT_EQ(async_error(), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "CommDestroy\n");
}

// A finalize inside a group releases peerplan's side locally: nothing is
// exchanged, nothing left pending, and NCCL finalizes.
TEST_F(InterposerTeardown, AFinalizeInAGroupExchangesNothingAndIsNcclsOwn) {
  ASSERT_NE(init(), nullptr);
  fake_nccl_hang_all_gathers(true);
  EXPECT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclCommFinalize(comm_), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "GroupStart\nCommFinalize\nGroupEnd\n");
}

}  // namespace
}  // namespace peerplan::nccl_interposer
