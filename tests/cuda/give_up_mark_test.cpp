// SPDX-License-Identifier: Apache-2.0
// The give-up word and the late-rank check (cuda/give_up_mark.cuh), checked
// on the host around the 2^32 wrap: a rank at the call a peer gave up on, or
// a later one, fails it; a rank at an earlier call does not; a give-up at
// epoch 0 is never taken for "no give-up"; which call a mark names.
#include <gtest/gtest.h>

#include <cstdint>

#include "give_up_mark.cuh"

namespace peerplan::cuda_kernels {
namespace {

constexpr std::uint32_t kGaveUpAt[] = {1u, 2u, 1000u, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFEu};

TEST(GiveUpMark, NoGiveUpFailsNoCall) {
  for (std::uint32_t call : {0u, 1u, 0x80000000u, 0xFFFFFFFFu}) {
    EXPECT_FALSE(late_for_mark(call, 0u)) << call;
  }
}

TEST(GiveUpMark, TheCallGivenUpOnAndLaterOnesFailEarlierOnesDoNot) {
  for (std::uint32_t epoch : kGaveUpAt) {
    const std::uint32_t mark = gave_up_mark(epoch);
    EXPECT_EQ(mark, epoch);
    for (std::uint32_t later : {0u, 1u, 2u, 16u}) {
      EXPECT_TRUE(late_for_mark(epoch + later, mark)) << epoch << " + " << later;
    }
    for (std::uint32_t earlier : {1u, 2u, 16u}) {
      EXPECT_FALSE(late_for_mark(epoch - earlier, mark)) << epoch << " - " << earlier;
    }
  }
}

TEST(GiveUpMark, AGiveUpAtEpochZeroFailsTheCallAtZeroAndLaterOnes) {
  const std::uint32_t mark = gave_up_mark(0u);
  EXPECT_NE(mark, 0u) << "0 means no give-up";
  for (std::uint32_t call : {0u, 1u, 2u, 16u}) EXPECT_TRUE(late_for_mark(call, mark)) << call;
  // The calls before 2^32 - 1 go on: the peer finished them.
  for (std::uint32_t call : {0xFFFFFFFEu, 0xFFFFFFF0u}) {
    EXPECT_FALSE(late_for_mark(call, mark)) << call;
  }
}

TEST(GiveUpMark, TheCallGivenUpOnIsTheMarkButAtTheWrap) {
  for (std::uint32_t epoch : kGaveUpAt) {
    for (std::uint32_t later : {0u, 1u, 2u}) {
      EXPECT_EQ(call_given_up(epoch + later, gave_up_mark(epoch)), epoch)
          << epoch << " + " << later;
      EXPECT_FALSE(ambiguous_wrap_mark(epoch + later, gave_up_mark(epoch)));
    }
  }
  // The mark of 0 is also that of 2^32 - 1: found at call 1 it is 0; found at
  // 2^32 - 1 it is that call; found at 0 it may be either.
  const std::uint32_t mark = gave_up_mark(0u);
  EXPECT_EQ(call_given_up(1u, mark), 0u);
  EXPECT_EQ(call_given_up(0xFFFFFFFFu, mark), 0xFFFFFFFFu);
  EXPECT_FALSE(ambiguous_wrap_mark(1u, mark));
  EXPECT_TRUE(ambiguous_wrap_mark(0u, mark));
}

}  // namespace
}  // namespace peerplan::cuda_kernels
