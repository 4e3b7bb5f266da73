// SPDX-License-Identifier: Apache-2.0
// The words of a kernel's error word (src/transport/cuda/device_error_text):
// which call a Timeout names, and which rank. A rank that finds at the start
// of a call that a peer gave up on an earlier call, one it completed late,
// names that earlier call and says its outputs are unspecified; a rank late
// for the very call names that call.
#include "transport/cuda/device_error_text.hpp"

#include <gtest/gtest.h>

#include <string>

#include "give_up_mark.cuh"

namespace peerplan::transport::cuda {
namespace {

using cuda_kernels::DeviceError;
using cuda_kernels::ErrorCode;
using cuda_kernels::Phase;

const std::vector<int> kGlobalRanks{4, 5};  // local ranks 0 and 1
constexpr std::chrono::milliseconds kTimeout{1500};

DeviceError word(ErrorCode code, std::uint32_t epoch, std::uint32_t peer, Phase phase,
                 std::uint32_t mark = 0) {
  DeviceError w{};
  w.code = static_cast<std::uint32_t>(code);
  w.epoch = epoch;
  w.phase = static_cast<std::uint32_t>(phase);
  w.peer = peer;
  w.peer_mark = mark;
  return w;
}

DeviceError late(std::uint32_t call, std::uint32_t mark) {
  return word(ErrorCode::peer_gave_up, call, cuda_kernels::kLatePeer + 1, Phase::arrive, mark);
}

std::string text(const DeviceError& w) {
  return describe_device_error(w, "all_reduce", kGlobalRanks, kTimeout);
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

TEST(DeviceErrorText, ATimeoutNamesItsCallTheRankAndTheBarrier) {
  const std::string t = text(word(ErrorCode::timeout, 7, 1, Phase::reduced));
  EXPECT_TRUE(starts_with(t, "P2P call #7 (detected at all_reduce) timed out after 1500 ms")) << t;
  EXPECT_NE(t.find("waiting for rank 5 to reduce their shard"), std::string::npos) << t;
}

TEST(DeviceErrorText, APeerThatGaveUpWhileThisRankWaitedIsNamed) {
  const std::string t = text(word(ErrorCode::peer_gave_up, 9, 0, Phase::arrive));
  EXPECT_TRUE(starts_with(t, "P2P call #9 (detected at all_reduce) failed: rank 4 gave up")) << t;
}

TEST(DeviceErrorText, ARankLateForTheCallAPeerGaveUpOnNamesThatCall) {
  for (const std::uint32_t call : {2u, 0xFFFFFFFFu}) {
    const std::string t = text(late(call, call));
    EXPECT_TRUE(starts_with(t, "P2P call #" + std::to_string(call) +
                                   " (detected at all_reduce) "
                                   "failed: this rank reached it late, after rank 5 had given up"))
        << t;
  }
  // A word without the mark (none recorded) names the call found at.
  EXPECT_NE(text(late(3, 0)).find("#3 (detected at all_reduce) failed: this rank reached it late"),
            std::string::npos);
}

TEST(DeviceErrorText, ACallCompletedAfterAPeerGaveUpOnItIsNamedNotTheNextOne) {
  const std::string t = text(late(8, 7));
  EXPECT_TRUE(starts_with(t,
                          "P2P call #7 (detected at all_reduce, the start of P2P call #8) "
                          "failed: rank 5 gave up on it"))
      << t;
  EXPECT_NE(t.find("its outputs are unspecified"), std::string::npos) << t;
  EXPECT_EQ(t.find("reached it late"), std::string::npos) << t;
}

TEST(DeviceErrorText, AcrossTheWrapTheMarkOfCallZeroIsReadAsTheCallItCanBe) {
  // The mark of epoch 0 is that of 2^32 - 1 too (give_up_mark.cuh).
  const std::uint32_t mark_of_zero = cuda_kernels::gave_up_mark(0);
  const std::string at_one = text(late(1, mark_of_zero));
  EXPECT_TRUE(starts_with(at_one, "P2P call #0 (detected at all_reduce, the start of P2P call #1)"))
      << at_one;
  // Found at 0 it may name either: the late reading first (cuda_epoch_wrap_test
  // makes this case on GPUs), the other said too.
  const std::string at_zero = text(late(0, mark_of_zero));
  EXPECT_TRUE(starts_with(at_zero,
                          "P2P call #0 (detected at all_reduce) failed: this rank "
                          "reached it late"))
      << at_zero;
  EXPECT_NE(at_zero.find("or on the call before it, #4294967295, which this rank completed"),
            std::string::npos)
      << at_zero;
  EXPECT_NE(at_zero.find("outputs of both calls as unspecified"), std::string::npos) << at_zero;
  // A give-up at 2^32 - 2 found at call 0: this rank completed 2^32 - 2 and 2^32 - 1.
  EXPECT_TRUE(starts_with(text(late(0, 0xFFFFFFFEu)), "P2P call #4294967294 (detected"));
}

TEST(DeviceErrorText, TheOtherCodesSayWhatHappened) {
  EXPECT_NE(text(word(ErrorCode::unregistered_buffer, 4, 1, Phase::arrive))
                .find("rank 5 named a registered buffer that this rank has no mapping of"),
            std::string::npos);
  EXPECT_NE(text(word(ErrorCode::node_shard_missing, 4, 0, Phase::none))
                .find("the sum between nodes that this rank received is not this call's"),
            std::string::npos);
  // A rank number the word cannot hold is not made up.
  EXPECT_NE(text(word(ErrorCode::timeout, 4, 6, Phase::arrive)).find("waiting for rank ? to"),
            std::string::npos);
}

}  // namespace
}  // namespace peerplan::transport::cuda
