// SPDX-License-Identifier: Apache-2.0
// The interposer's dispatch, linked in (not preloaded), with a fake NCCL
// (fake_nccl.cpp, through PEERPLAN_NCCL_LIBRARY) and a fake peerplan
// communicator put in the side table: which library runs each
// ncclAllReduce, a group of one all-reduce run on peerplan after the real
// group end, a simulated group, peerplan's errors in NCCL's terms, close
// before NCCL's destroy, and which communicators are non-blocking. No GPU:
// nothing runs on a device.
#include <gtest/gtest.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "nccl_interposer/comm_table.hpp"
#include "peerplan/errors.hpp"
#include "plan/validation.hpp"
#include "fake_nccl_record.hpp"
#include "stand_in_communicator.hpp"

namespace peerplan::nccl_interposer {
namespace {

// Before the interposer's first call, which resolves the real functions.
const bool kFakeNccl = setenv("PEERPLAN_NCCL_LIBRARY", PEERPLAN_FAKE_NCCL, 1) == 0;

// What the fake peerplan communicator saw; outlives it.
struct Seen {
  std::vector<std::int64_t> all_reduces;  // counts
  std::string nccl_calls_at_last_all_reduce;
  bool closed = false;
  std::atomic<bool> destroyed{false};  // set on the thread that releases it
  // While not ready (at most 20 s), the destructor waits: a release that
  // GPU work holds up.
  std::shared_future<void> hold_destructor;
  std::string nccl_calls_at_close = "(not closed)";
};

// Routes every key peer to peer but those of `over_cutoff`, which it routes
// to its fallback as larger than its cutoffs.
class FakePeerplan final : public StandInCommunicator {
 public:
  FakePeerplan(std::shared_ptr<Seen> seen, std::function<void()> fail = {},
               std::vector<PlanKey> over_cutoff = {})
      : seen_(std::move(seen)), fail_(std::move(fail)), over_cutoff_(std::move(over_cutoff)) {}
  ~FakePeerplan() override {
    if (seen_->hold_destructor.valid()) seen_->hold_destructor.wait_for(std::chrono::seconds(20));
    seen_->destroyed = true;
  }

  CallResult all_reduce(const void*, void*, DataType, const TensorLayout& layout,
                        StreamHandle) override {
    if (fail_) fail_();
    seen_->all_reduces.push_back(layout.numel());
    seen_->nccl_calls_at_last_all_reduce = fake_nccl_calls(false);
    return {Route::one_shot, FallbackReason::none};
  }
  void close() override {
    seen_->closed = true;
    seen_->nccl_calls_at_close = fake_nccl_calls();
  }
  PlanInfo plan_for(const PlanKey& key) const override {
    PlanInfo plan;
    const bool fallback =
        std::find(over_cutoff_.begin(), over_cutoff_.end(), key) != over_cutoff_.end();
    plan.route = fallback ? Route::fallback : Route::one_shot;
    plan.route_reason = fallback ? FallbackReason::over_cutoff : FallbackReason::none;
    return plan;
  }
  bool is_closed() const noexcept override { return seen_->closed; }

 private:
  std::shared_ptr<Seen> seen_;
  std::function<void()> fail_;
  std::vector<PlanKey> over_cutoff_;
};

class InterposerDispatch : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kFakeNccl);
    comm_ = reinterpret_cast<ncclComm_t>(&handles_[next_++ % 64]);
    install(nullptr);
    fake_nccl_calls();
  }
  void TearDown() override { take_comm(comm_); }

  // Declares bf16 x 128 and f32 x 64, and bf16 x 256, which peerplan
  // routes to its fallback.
  void install(std::function<void()> fail) {
    seen_ = std::make_shared<Seen>();
    const std::vector<PlanKey> over_cutoff{make_all_reduce_key(DataType::bf16, TensorLayout{256})};
    install_peerplan(comm_, std::make_unique<FakePeerplan>(seen_, std::move(fail), over_cutoff),
                     {{DataType::bf16, 128}, {DataType::bf16, 256}, {DataType::f32, 64}},
                     0);  // sorted
  }
  std::string summary() const {
    const auto state = find_comm(comm_);
    return state ? state->summary() : "(no communicator)";
  }
  ncclResult_t all_reduce(std::size_t count, ncclDataType_t type = ncclFloat,
                          ncclRedOp_t op = ncclSum, std::size_t offset = 0) {
    return ncclAllReduce(buffer_ + offset, buffer_ + offset, count, type, op, comm_, nullptr);
  }

  static inline int handles_[64];
  static inline int next_ = 0;
  ncclComm_t comm_ = nullptr;
  std::shared_ptr<Seen> seen_;
  alignas(256) float buffer_[512] = {};
};

using Counts = std::vector<std::int64_t>;

TEST_F(InterposerDispatch, ADeclaredAlignedSumRunsOnPeerplanOnly) {
  EXPECT_EQ(all_reduce(64), ncclSuccess);
  EXPECT_EQ(all_reduce(128, ncclBfloat16), ncclSuccess);
  EXPECT_EQ(seen_->all_reduces, (Counts{64, 128}));
  EXPECT_EQ(fake_nccl_calls(), "");
}

TEST_F(InterposerDispatch, EverythingElseRunsOnNcclOnly) {
  all_reduce(32);                         // undeclared count
  all_reduce(64, ncclFloat, ncclProd);    // another reduction
  all_reduce(64, ncclInt32);              // another type
  all_reduce(64, ncclHalf);               // declared for another type only
  all_reduce(64, ncclFloat, ncclSum, 1);  // 4 bytes off alignment
  EXPECT_EQ(seen_->all_reduces, Counts{});
  EXPECT_EQ(fake_nccl_calls(),
            "AllReduce 32\nAllReduce 64\nAllReduce 64\nAllReduce 64\nAllReduce 64\n");
}

TEST_F(InterposerDispatch, ADeclaredSizePeerplanRoutesToItsFallbackRunsOnNcclUnderItsOwnCause) {
  EXPECT_EQ(all_reduce(256, ncclBfloat16), ncclSuccess);
  EXPECT_EQ(all_reduce(255, ncclBfloat16), ncclSuccess);
  EXPECT_EQ(seen_->all_reduces, Counts{});
  EXPECT_EQ(fake_nccl_calls(), "AllReduce 256\nAllReduce 255\n");
  const std::string text = summary();
  EXPECT_NE(text.find("512 bytes: 0 to peerplan, 1 to NCCL (peerplan_route 1)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("510 bytes: 0 to peerplan, 1 to NCCL (undeclared_count 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("declared, but peerplan routes them to its fallback: nccl_bf16_256 "
                      "(over_cutoff)"),
            std::string::npos)
      << text;
}

TEST_F(InterposerDispatch, AGroupOfOneDeclaredAllReduceRunsOnPeerplanAfterTheRealGroupEnd) {
  ncclGroupStart();
  EXPECT_EQ(all_reduce(64), ncclSuccess);
  EXPECT_EQ(seen_->all_reduces, Counts{}) << "ran before the group ended";
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(seen_->all_reduces, Counts{64});
  EXPECT_EQ(seen_->nccl_calls_at_last_all_reduce, "GroupStart\nGroupEnd\n")
      << "peerplan ran inside the real group";
  EXPECT_EQ(fake_nccl_calls(), "GroupStart\nGroupEnd\n");
}

// A group whose real end failed ran none of its operations: peerplan does
// not run the held one either (a program that retries would sum twice).
TEST_F(InterposerDispatch, AGroupWhoseRealEndFailedRunsNothingOnPeerplan) {
  ncclGroupStart();
  EXPECT_EQ(all_reduce(64), ncclSuccess);
  fake_nccl_fail_next_group_end(ncclSystemError);
  EXPECT_EQ(ncclGroupEnd(), ncclSystemError);
  EXPECT_EQ(seen_->all_reduces, Counts{});
  EXPECT_EQ(fake_nccl_calls(), "GroupStart\nGroupEnd\n");
  // The next group is a group again.
  ncclGroupStart();
  EXPECT_EQ(all_reduce(64), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(seen_->all_reduces, Counts{64});
}

// NCCL refuses bad arguments at the call, in a group too, and its group
// end fails the group: a first all-reduce peerplan cannot run is not held
// back, so the program learns it at the call.
TEST_F(InterposerDispatch, BadArgumentsInAGroupFailAtTheCallAsInNccl) {
  ncclGroupStart();
  EXPECT_EQ(all_reduce(64, static_cast<ncclDataType_t>(99)), ncclInvalidArgument);
  EXPECT_EQ(fake_nccl_calls(false), "GroupStart\nAllReduce invalid 64\n");
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  // A declared count on null buffers.
  ncclGroupStart();
  EXPECT_EQ(ncclAllReduce(nullptr, nullptr, 64, ncclFloat, ncclSum, comm_, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_EQ(seen_->all_reduces, Counts{});
  EXPECT_EQ(fake_nccl_calls(),
            "GroupStart\nAllReduce invalid 64\nGroupEnd\n"
            "GroupStart\nAllReduce invalid 64\nGroupEnd\n");
  // The next group is fine again, its declared all-reduce held for peerplan.
  ncclGroupStart();
  EXPECT_EQ(all_reduce(64), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(seen_->all_reduces, Counts{64});
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 0)  // ncclGroupSimulateEnd
// ncclGroupSimulateEnd ends the group and runs none of it: the held
// all-reduce goes to NCCL, which only estimates it (not counted), and the
// next call is outside any group.
TEST_F(InterposerDispatch, ASimulatedGroupRunsNothingAndEndsTheGroup) {
  ncclGroupStart();
  EXPECT_EQ(all_reduce(64), ncclSuccess);
  ncclSimInfo_t simulated = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(ncclGroupSimulateEnd(&simulated), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "GroupStart\nAllReduce 64\nGroupSimulateEnd\n");
  EXPECT_EQ(seen_->all_reduces, Counts{});
  EXPECT_EQ(all_reduce(64), ncclSuccess);
  EXPECT_EQ(seen_->all_reduces, Counts{64});
  EXPECT_EQ(fake_nccl_calls(), "");
  EXPECT_EQ(summary().find("all-reduce calls: 1 to peerplan, 0 to NCCL, over 1 size\n"
                           "  256 bytes: 1 to peerplan, 0 to NCCL\n"),
            0u)
      << summary();
}

TEST_F(InterposerDispatch, ASimulatedInnerGroupLeavesTheOuterGroupOpen) {
  ncclGroupStart();
  ncclGroupStart();
  EXPECT_EQ(all_reduce(64), ncclSuccess);
  ncclSimInfo_t simulated = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(ncclGroupSimulateEnd(&simulated), ncclSuccess);
  EXPECT_EQ(seen_->all_reduces, Counts{}) << "ran before the outer group ended";
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(seen_->all_reduces, Counts{64});
  EXPECT_EQ(fake_nccl_calls(), "GroupStart\nGroupStart\nGroupSimulateEnd\nGroupEnd\n");
}
#endif

TEST_F(InterposerDispatch, AGroupOfSeveralRunsOnNcclInTheProgramsOrder) {
  ncclGroupStart();
  all_reduce(64);
  ncclSend(buffer_, 8, ncclFloat, 1, comm_, nullptr);
  all_reduce(128, ncclBfloat16);
  ncclGroupEnd();
  EXPECT_EQ(seen_->all_reduces, Counts{});
  EXPECT_EQ(fake_nccl_calls(), "GroupStart\nAllReduce 64\nSend 8\nAllReduce 128\nGroupEnd\n");
}

// A timeout breaks the communicator, as an asynchronous error breaks NCCL's
// own: every later operation on it is ncclRemoteError and reaches neither
// peerplan nor NCCL (the ranks may see the timeout at different calls, and
// one rank's call handed to NCCL would pair with another's next one), until
// the program aborts it. Another communicator is unaffected.
TEST_F(InterposerDispatch, AfterATimeoutEveryLaterCallOnTheCommunicatorFailsAndRunsNowhere) {
  bool time_out = true;
  install([&time_out] {
    if (time_out) throw Timeout("peer 1 never came");
  });
  EXPECT_EQ(all_reduce(64), ncclRemoteError);
  EXPECT_NE(std::string(ncclGetLastError(comm_)).find("peer 1 never came"), std::string::npos)
      << ncclGetLastError(comm_);
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
  EXPECT_EQ(async, ncclRemoteError);
  // peerplan would run the declared one now: it must not be asked, nor NCCL
  // for any (declared, undeclared, of another type, misaligned).
  time_out = false;
  EXPECT_EQ(all_reduce(64), ncclRemoteError);
  EXPECT_EQ(all_reduce(32), ncclRemoteError);
  EXPECT_EQ(all_reduce(64, ncclInt32), ncclRemoteError);
  EXPECT_EQ(all_reduce(64, ncclFloat, ncclSum, 1), ncclRemoteError);
  EXPECT_EQ(ncclBroadcast(buffer_, buffer_, 8, ncclFloat, 0, comm_, nullptr), ncclRemoteError);
  EXPECT_EQ(ncclRecv(buffer_, 8, ncclFloat, 1, comm_, nullptr), ncclRemoteError);
  EXPECT_EQ(seen_->all_reduces, Counts{});
  EXPECT_EQ(fake_nccl_calls(), "");
  const std::string why = ncclGetLastError(comm_);
  EXPECT_NE(why.find("peer 1 never came"), std::string::npos) << why;
  EXPECT_NE(why.find("abort the communicator"), std::string::npos) << why;
  async = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
  EXPECT_EQ(async, ncclRemoteError);
  // Run by neither library: counted among the failed calls.
  EXPECT_NE(summary().find("256 bytes: 0 to peerplan, 0 to NCCL, 4 failed (peerplan_error 1, "
                           "after_timeout 3)"),
            std::string::npos)
      << summary();
  EXPECT_NE(summary().find("128 bytes: 0 to peerplan, 0 to NCCL, 1 failed (after_timeout 1)"),
            std::string::npos)
      << summary();

  // Another communicator runs as before.
  int other_handle = 0;
  const auto other = reinterpret_cast<ncclComm_t>(&other_handle);
  const auto other_seen = std::make_shared<Seen>();
  install_peerplan(other, std::make_unique<FakePeerplan>(other_seen), {{DataType::f32, 64}}, 0);
  EXPECT_EQ(ncclAllReduce(buffer_, buffer_, 64, ncclFloat, ncclSum, other, nullptr), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(buffer_, buffer_, 32, ncclFloat, ncclSum, other, nullptr), ncclSuccess);
  EXPECT_EQ(other_seen->all_reduces, Counts{64});
  EXPECT_EQ(fake_nccl_calls(), "AllReduce 32\n");
  take_comm(other);

  // Aborted, the handle is NCCL's to reuse: a new communicator there is not broken.
  EXPECT_EQ(ncclCommAbort(comm_), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "CommAbort\n");
  install(nullptr);
  EXPECT_EQ(all_reduce(64), ncclSuccess);
  EXPECT_EQ(all_reduce(32), ncclSuccess);
  EXPECT_EQ(seen_->all_reduces, Counts{64});
  EXPECT_EQ(fake_nccl_calls(), "AllReduce 32\n");
}

// After a create that gave up with NCCL's operations out of step (no
// timeout of a call), every call goes to NCCL, and the program is told to
// abort (ncclCommGetAsyncError): NCCL, which asks it before it runs a call
// (as the fake does), gets its own answer and runs them.
TEST_F(InterposerDispatch, AfterACreateThatGaveUpNcclGetsItsOwnAsyncErrorAndRunsTheCalls) {
  const auto state = find_comm(comm_);
  state->release_communicator();
  state->async_error = static_cast<int>(ncclRemoteError);
  EXPECT_EQ(all_reduce(64), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "AllReduce 64\n");
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
  EXPECT_EQ(async, ncclRemoteError);
}

// A group holding an operation refused so fails as a whole, as NCCL's does
// when one of its operations fails: NCCL runs none of the group's
// operations (here one on another communicator, and an all-reduce held for
// peerplan), peerplan none either, and the group's end reports it.
TEST_F(InterposerDispatch, AGroupWithAnOperationOnACommunicatorATimeoutBrokeFailsAsAWhole) {
  install([] { throw Timeout("peer 1 never came"); });
  EXPECT_EQ(all_reduce(64), ncclRemoteError);
  int other_handle = 0;
  const auto other = reinterpret_cast<ncclComm_t>(&other_handle);
  const auto other_seen = std::make_shared<Seen>();
  install_peerplan(other, std::make_unique<FakePeerplan>(other_seen), {{DataType::f32, 64}}, 0);

  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(buffer_, buffer_, 64, ncclFloat, ncclSum, other, nullptr), ncclSuccess);
  EXPECT_EQ(ncclBroadcast(buffer_, buffer_, 8, ncclFloat, 0, other, nullptr), ncclSuccess);
  EXPECT_EQ(all_reduce(64), ncclRemoteError);
  EXPECT_EQ(ncclGroupEnd(), ncclRemoteError);
  EXPECT_EQ(fake_nccl_calls(),
            "GroupStart\nAllReduce 64\nBroadcast 8\nAllReduce invalid 0\nGroupEnd\n")
      << "NCCL was not made to fail the group";
  EXPECT_NE(std::string(ncclGetLastError(comm_)).find("abort the communicator"), std::string::npos)
      << ncclGetLastError(comm_);

  // Alone in its group, and an operation other than an all-reduce; an
  // all-reduce held for peerplan on another communicator is not run.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(all_reduce(64), ncclRemoteError);
  EXPECT_EQ(ncclGroupEnd(), ncclRemoteError);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(buffer_, buffer_, 64, ncclFloat, ncclSum, other, nullptr), ncclSuccess);
  EXPECT_EQ(ncclSend(buffer_, 8, ncclFloat, 1, comm_, nullptr), ncclRemoteError);
  EXPECT_EQ(ncclGroupEnd(), ncclRemoteError);
  EXPECT_EQ(fake_nccl_calls(),
            "GroupStart\nAllReduce invalid 0\nGroupEnd\n"
            "GroupStart\nAllReduce 64\nAllReduce invalid 0\nGroupEnd\n");
  EXPECT_EQ(other_seen->all_reduces, Counts{});

  // The next group, without the broken communicator, runs.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(buffer_, buffer_, 64, ncclFloat, ncclSum, other, nullptr), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(other_seen->all_reduces, Counts{64});
  EXPECT_EQ(fake_nccl_calls(), "GroupStart\nGroupEnd\n");
  take_comm(other);
}

TEST_F(InterposerDispatch, AnInvalidArgumentIsNcclsAndLeavesTheCommunicatorUsable) {
  bool fail = true;
  install([&fail] {
    if (fail) throw InvalidArgument("bad pointer");
  });
  EXPECT_EQ(all_reduce(64), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comm_)).find("bad pointer"), std::string::npos);
  ncclResult_t async = ncclInternalError;
  ncclCommGetAsyncError(comm_, &async);
  EXPECT_EQ(async, ncclSuccess);
  fail = false;
  EXPECT_EQ(all_reduce(64), ncclSuccess);
  EXPECT_EQ(seen_->all_reduces, Counts{64});
}

// NCCL keeps one last error per process: a watchdog thread asking after
// the main thread's call failed gets peerplan's text, until NCCL records a
// newer failure, also in a function the interposer does not define.
TEST_F(InterposerDispatch, PeerplansLastErrorIsTheProcesssUntilNcclRecordsANewerOne) {
  install([] { throw InvalidArgument("bad pointer"); });
  EXPECT_EQ(all_reduce(64), ncclInvalidArgument);
  std::string seen_by_watchdog;
  std::thread([&] { seen_by_watchdog = ncclGetLastError(nullptr); }).join();
  EXPECT_EQ(seen_by_watchdog, "peerplan: bad pointer");
  fake_nccl_fail_elsewhere("fake: ncclMemAlloc failed");
  EXPECT_EQ(std::string(ncclGetLastError(comm_)), "fake: ncclMemAlloc failed");
  EXPECT_EQ(all_reduce(64), ncclInvalidArgument);
  EXPECT_EQ(std::string(ncclGetLastError(comm_)), "peerplan: bad pointer");
  fake_nccl_fail_elsewhere("fake last error");
}

// NCCL's ncclBcast is its ncclBroadcast in place, called through the
// exported symbol (the fake's too): one operation, counted once.
TEST_F(InterposerDispatch, ABcastIsCountedOnce) {
  EXPECT_EQ(ncclBcast(buffer_, 64, ncclFloat, 0, comm_, nullptr), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "Broadcast 64\n");
  EXPECT_NE(summary().find("256 bytes: 0 to peerplan, 1 to NCCL (not_all_reduce 1)"),
            std::string::npos)
      << summary();
}

TEST_F(InterposerDispatch, DestroyClosesPeerplanBeforeNcclsDestroy) {
  EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
  EXPECT_TRUE(seen_->closed);
  EXPECT_EQ(seen_->nccl_calls_at_close, "") << "NCCL's destroy came before peerplan's close";
  EXPECT_TRUE(seen_->destroyed);
  EXPECT_EQ(fake_nccl_calls(), "CommDestroy\n");
}

TEST_F(InterposerDispatch, AbortReleasesPeerplanWithoutClosingAfterNcclsAbort) {
  EXPECT_EQ(ncclCommAbort(comm_), ncclSuccess);
  EXPECT_FALSE(seen_->closed) << "abort must not run peerplan's collective close";
  EXPECT_TRUE(seen_->destroyed);
  EXPECT_EQ(fake_nccl_calls(), "CommAbort\n");
}

// An abort returns although peerplan's release is held up (GPU work that
// never ends, which is what aborts are for); the release ends on its own.
TEST_F(InterposerDispatch, AnAbortReturnsWhilePeerplansReleaseIsHeldUp) {
  std::promise<void> let_go;
  seen_->hold_destructor = let_go.get_future().share();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommAbort(comm_), ncclSuccess);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(10)) << "the abort waited for the held-up release";
  EXPECT_FALSE(seen_->destroyed);
  let_go.set_value();
  for (int i = 0; i < 2000 && !seen_->destroyed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(seen_->destroyed);
}

TEST_F(InterposerDispatch, AnAbortOnAnotherThreadFreesPeerplanOnlyAfterTheCallInIt) {
  using namespace std::chrono_literals;
  std::promise<void> entered;
  std::promise<void> aborted;
  std::shared_future<void> abort_done = aborted.get_future().share();
  bool destroyed_during_call = true;
  std::shared_ptr<Seen> seen;
  install([&] {
    entered.set_value();
    if (abort_done.wait_for(10s) != std::future_status::ready) return;
    destroyed_during_call = seen->destroyed;
  });
  seen = seen_;
  ncclResult_t in_call = ncclInternalError;
  std::thread caller([&] { in_call = all_reduce(64); });
  ASSERT_EQ(entered.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_EQ(ncclCommAbort(comm_), ncclSuccess);
  aborted.set_value();
  caller.join();
  EXPECT_EQ(in_call, ncclSuccess);
  EXPECT_FALSE(destroyed_during_call) << "the abort freed peerplan's communicator under a call";
  EXPECT_TRUE(seen->destroyed) << "released once the call returned";
  EXPECT_FALSE(seen->closed);
  EXPECT_EQ(all_reduce(64), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "CommAbort\nAllReduce 64\n");
  EXPECT_EQ(seen->all_reduces, Counts{64});
}

TEST_F(InterposerDispatch, ACommunicatorMarkedAbortedSendsItsCallsToNccl) {
  // What a thread that found the communicator just before ncclCommAbort
  // took it out of the table sees.
  find_comm(comm_)->aborted = true;
  EXPECT_EQ(all_reduce(64), ncclSuccess);
  EXPECT_EQ(seen_->all_reduces, Counts{});
  EXPECT_EQ(fake_nccl_calls(), "AllReduce 64\n");
}

// Two ranks, the other answering every exchange as this one does: the roll
// call sees both declare, and the final agreement is this rank's.
class EchoBootstrap final : public bootstrap::Bootstrap {
 public:
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 2; }
  int local_rank() const noexcept override { return 0; }
  int local_size() const noexcept override { return 2; }
  int node_id() const noexcept override { return 0; }
  int num_nodes() const noexcept override { return 1; }
  std::vector<bootstrap::Blob> allgather(std::span<const std::byte> mine) override {
    return {bootstrap::Blob(mine.begin(), mine.end()), bootstrap::Blob(mine.begin(), mine.end())};
  }
  std::vector<bootstrap::Blob> local_allgather(std::span<const std::byte> mine) override {
    return allgather(mine);
  }
  bootstrap::Blob broadcast(std::span<const std::byte> blob, int) override {
    return bootstrap::Blob(blob.begin(), blob.end());
  }
  void barrier() override {}
  bool agree(bool ok) override { return ok; }
};

// What peerplan's declare checks first: the set is refused as a whole when
// one declaration breaks a rule (plan::validate_declarations). Records the
// declared names and the counts of the all-reduces it ran.
class ValidatingPeerplan final : public StandInCommunicator {
 public:
  explicit ValidatingPeerplan(std::shared_ptr<Seen> seen) : seen_(std::move(seen)) {}
  void declare(std::span<const Declaration> declarations) override {
    plan::validate_declarations(declarations);
    for (const Declaration& declaration : declarations) declared_.push_back(declaration.name);
  }
  CallResult all_reduce(const void*, void*, DataType, const TensorLayout& layout,
                        StreamHandle) override {
    seen_->all_reduces.push_back(layout.numel());
    return {Route::one_shot, FallbackReason::none};
  }
  static inline std::vector<std::string> declared_;

 private:
  std::shared_ptr<Seen> seen_;
};

// attach_peerplan for real, from PEERPLAN_NCCL_DECLARE, over stand-ins of
// the bootstrap and of peerplan's create.
class InterposerDeclare : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kFakeNccl);
    unsetenv("PEERPLAN_PLAN_FILE");
    unsetenv("NCCL_COMM_BLOCKING");
    ValidatingPeerplan::declared_.clear();
    set_bootstrap_maker([](ncclComm_t, const bootstrap::NcclFunctions&,
                           std::chrono::milliseconds) -> std::unique_ptr<bootstrap::Bootstrap> {
      return std::make_unique<EchoBootstrap>();
    });
    set_communicator_maker(
        [this](std::unique_ptr<bootstrap::Bootstrap>, Config) -> std::unique_ptr<Communicator> {
          return std::make_unique<ValidatingPeerplan>(seen_);
        });
  }
  void TearDown() override {
    set_bootstrap_maker({});
    set_communicator_maker({});
    take_comm(comm());
    for (const char* name : {"PEERPLAN_NCCL_DECLARE", "PEERPLAN_DEBUG"}) unsetenv(name);
  }
  static ncclComm_t comm() { return reinterpret_cast<ncclComm_t>(&handle_); }
  std::shared_ptr<CommState> attach(const char* declare) {
    setenv("PEERPLAN_NCCL_DECLARE", declare, 1);
    attach_peerplan(comm());
    fake_nccl_calls();
    return find_comm(comm());
  }
  ncclResult_t all_reduce(std::size_t count, ncclDataType_t type) {
    return ncclAllReduce(buffer_, buffer_, count, type, ncclSum, comm(), nullptr);
  }

  std::shared_ptr<Seen> seen_ = std::make_shared<Seen>();
  static inline int handle_ = 0;
  alignas(256) float buffer_[64] = {};
};

// The documented "bf16:8-256M:x2" starts at bf16[4], 8 bytes, which peerplan
// cannot declare: it is left to NCCL, and the rest still run on peerplan
// (declared with it, peerplan refused the whole set, and every call went
// to NCCL).
TEST_F(InterposerDeclare, ASizePeerplanCannotDeclareGoesToNcclAndTheOthersToPeerplan) {
  const auto state = attach("bf16:8-64:x2");
  ASSERT_NE(state, nullptr);
  ASSERT_NE(state->communicator(), nullptr) << state->reason;
  EXPECT_EQ(ValidatingPeerplan::declared_,
            (std::vector<std::string>{"nccl_bf16_8", "nccl_bf16_16", "nccl_bf16_32"}));
  EXPECT_EQ(all_reduce(16, ncclBfloat16), ncclSuccess);  // 32 bytes
  EXPECT_EQ(all_reduce(4, ncclBfloat16), ncclSuccess);   // 8 bytes
  EXPECT_EQ(all_reduce(2, ncclBfloat16), ncclSuccess);   // 4 bytes, never declared
  EXPECT_EQ(seen_->all_reduces, Counts{16});
  EXPECT_EQ(fake_nccl_calls(), "AllReduce 4\nAllReduce 2\n");
  const std::string text = state->summary();
  EXPECT_NE(text.find("all-reduce calls: 1 to peerplan, 2 to NCCL, over 3 sizes"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n  8 bytes: 0 to peerplan, 1 to NCCL (not_declarable 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n  4 bytes: 0 to peerplan, 1 to NCCL (undeclared_count 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("32 bytes: 1 to peerplan, 0 to NCCL"), std::string::npos) << text;
  EXPECT_NE(text.find("declared, but peerplan cannot declare them (not_declarable): nccl_bf16_4"),
            std::string::npos)
      << text;
}

// Rank 0 says so once, at create: an INFO for a size a range swept in, a
// WARN for one the user wrote on its own.
TEST_F(InterposerDeclare, RankZeroSaysWhichSizesItLeftToNcclAndWhy) {
  setenv("PEERPLAN_DEBUG", "INFO", 1);
  testing::internal::CaptureStderr();
  attach("bf16:8-64:x2;f32:4");
  const std::string said = testing::internal::GetCapturedStderr();
  const std::size_t info = said.find("INFO: NCCL interposer: 1 declared size is left to NCCL");
  const std::size_t warn = said.find("WARN: NCCL interposer: 1 declared size is left to NCCL");
  ASSERT_NE(info, std::string::npos) << said;
  ASSERT_NE(warn, std::string::npos) << said;
  EXPECT_NE(said.find("nccl_bf16_4 (8 bytes): layout.shape[0] is 4: a row of 8 bytes is not a "
                      "multiple of 16 bytes",
                      info),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("nccl_f32_1 (4 bytes)", warn), std::string::npos) << said;
  EXPECT_EQ(said.find("every call goes to NCCL"), std::string::npos) << said;
}

// Nothing left that peerplan can declare: no create, as when nothing is
// declared, and the reason says so.
TEST_F(InterposerDeclare, NothingPeerplanCanDeclareIsAsNothingDeclared) {
  const auto state = attach("f32:4-8:x2");
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->communicator(), nullptr);
  EXPECT_NE(state->reason.find("nothing is declared"), std::string::npos) << state->reason;
  EXPECT_NE(state->reason.find("no declared size is one peerplan can declare"), std::string::npos)
      << state->reason;
  EXPECT_TRUE(ValidatingPeerplan::declared_.empty());
  EXPECT_EQ(all_reduce(1, ncclFloat), ncclSuccess);
  EXPECT_EQ(fake_nccl_calls(), "AllReduce 1\n");
}

// Counts the bootstraps attach_peerplan makes, each failing at once (no
// peers): whether peerplan's collective setup was entered on a new
// communicator.
class CountedBootstraps {
 public:
  CountedBootstraps() {
    set_bootstrap_maker([this](ncclComm_t, const bootstrap::NcclFunctions&,
                               std::chrono::milliseconds) -> std::unique_ptr<bootstrap::Bootstrap> {
      ++made_;
      throw NcclError("stand-in bootstrap: no peers");
    });
  }
  ~CountedBootstraps() { set_bootstrap_maker({}); }
  int made() const { return made_; }

 private:
  int made_ = 0;
};

// A communicator NCCL makes non-blocking gets no bootstrap, and nothing is
// asked of it (NCCL warns of calls on one still initialising).
void expect_non_blocking(ncclComm_t comm, const CountedBootstraps& bootstraps) {
  const auto state = find_comm(comm);
  ASSERT_NE(state, nullptr);
  EXPECT_NE(state->reason.find("non-blocking"), std::string::npos) << state->reason;
  EXPECT_EQ(bootstraps.made(), 0);
  EXPECT_EQ(fake_nccl_calls().find("CommUserRank"), std::string::npos);
}

// NCCL_COMM_BLOCKING=0 makes every communicator non-blocking, those of
// ncclCommInitRank too: peerplan's bootstrap, which waits on NCCL calls,
// must not run on it. The reason is recorded without any exchange.
TEST(InterposerInit, NcclCommBlockingZeroKeepsPeerplanOffACommunicatorOfInitRank) {
  ASSERT_TRUE(kFakeNccl);
  ASSERT_EQ(setenv("NCCL_COMM_BLOCKING", "0", 1), 0);
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  const ncclResult_t result = ncclCommInitRank(&comm, 2, id, 0);
  unsetenv("NCCL_COMM_BLOCKING");
  ASSERT_EQ(result, ncclSuccess);
  const auto state = find_comm(comm);
  ASSERT_NE(state, nullptr);
  EXPECT_NE(state->reason.find("non-blocking"), std::string::npos) << state->reason;
  EXPECT_FALSE(state->has_communicator());
  take_comm(comm);
}

// NCCL_COMM_BLOCKING=0 or 1 overrides ncclConfig_t::blocking.
TEST(InterposerInit, NcclCommBlockingOverridesTheConfig) {
  ASSERT_TRUE(kFakeNccl);
  ncclUniqueId id{};
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclComm_t non_blocking = nullptr, blocking = nullptr;
  {
    const CountedBootstraps bootstraps;
    fake_nccl_calls();
    config.blocking = 1;
    ASSERT_EQ(setenv("NCCL_COMM_BLOCKING", "0", 1), 0);
    ASSERT_EQ(ncclCommInitRankConfig(&non_blocking, 2, id, 0, &config), ncclSuccess);
    expect_non_blocking(non_blocking, bootstraps);
  }
  {
    const CountedBootstraps bootstraps;
    config.blocking = 0;
    ASSERT_EQ(setenv("NCCL_COMM_BLOCKING", "1", 1), 0);
    ASSERT_EQ(ncclCommInitRankConfig(&blocking, 2, id, 0, &config), ncclSuccess);
    EXPECT_EQ(bootstraps.made(), 1) << find_comm(blocking)->reason;
  }
  unsetenv("NCCL_COMM_BLOCKING");
  take_comm(non_blocking);
  take_comm(blocking);
}

// ncclCommSplit with no config copies the parent's: a split of a
// non-blocking communicator is non-blocking. One with a config of its own
// is blocking unless that config says otherwise.
TEST(InterposerInit, ASplitWithoutConfigInheritsItsParentsNonBlocking) {
  ASSERT_TRUE(kFakeNccl);
  unsetenv("NCCL_COMM_BLOCKING");
  ncclUniqueId id{};
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t parent = nullptr, child = nullptr, configured = nullptr;
  {
    const CountedBootstraps bootstraps;
    fake_nccl_calls();
    ASSERT_EQ(ncclCommInitRankConfig(&parent, 2, id, 0, &config), ncclSuccess);
    ASSERT_EQ(ncclCommSplit(parent, 0, 0, &child, nullptr), ncclSuccess);
    expect_non_blocking(child, bootstraps);
  }
  {
    const CountedBootstraps bootstraps;
    ncclConfig_t own = NCCL_CONFIG_INITIALIZER;
    ASSERT_EQ(ncclCommSplit(parent, 1, 0, &configured, &own), ncclSuccess);
    EXPECT_EQ(bootstraps.made(), 1) << find_comm(configured)->reason;
  }
  take_comm(parent);
  take_comm(child);
  take_comm(configured);
}

// ncclCommInitAll's communicators get the reason of one process holding
// every rank: they are blocking (NCCL is asked for their ranks), not taken
// for non-blocking ones.
TEST(InterposerInit, CommunicatorsOfInitAllAreRefusedForBeingInOneProcess) {
  ASSERT_TRUE(kFakeNccl);
  unsetenv("NCCL_COMM_BLOCKING");
  const CountedBootstraps bootstraps;
  fake_nccl_calls();
  ncclComm_t comms[2] = {};
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  for (ncclComm_t comm : comms) {
    const auto state = find_comm(comm);
    ASSERT_NE(state, nullptr);
    EXPECT_NE(state->reason.find("ncclCommInitAll"), std::string::npos) << state->reason;
    EXPECT_FALSE(state->non_blocking);
    take_comm(comm);
  }
  EXPECT_EQ(bootstraps.made(), 0);
  EXPECT_NE(fake_nccl_calls().find("CommUserRank"), std::string::npos);
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 0)  // ncclGroupSimulateEnd
// NCCL initialises the communicators made in a group at its end, a
// simulated end too: peerplan's side comes after it.
TEST(InterposerInit, ACommunicatorMadeInASimulatedGroupIsSetUpAtItsEnd) {
  ASSERT_TRUE(kFakeNccl);
  unsetenv("NCCL_COMM_BLOCKING");
  const CountedBootstraps bootstraps;
  ncclUniqueId id{};
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclCommInitRank(&comm, 2, id, 0), ncclSuccess);
  EXPECT_EQ(find_comm(comm), nullptr) << "set up before the group ended";
  ncclSimInfo_t simulated = NCCL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(ncclGroupSimulateEnd(&simulated), ncclSuccess);
  EXPECT_NE(find_comm(comm), nullptr);
  EXPECT_EQ(bootstraps.made(), 1);
  take_comm(comm);
}
#endif

}  // namespace
}  // namespace peerplan::nccl_interposer
