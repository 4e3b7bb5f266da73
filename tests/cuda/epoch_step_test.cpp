// SPDX-License-Identifier: Apache-2.0
// How one call's epoch follows the last (cuda/epoch_step.cuh), checked on
// the host across the 2^32 wrap: no call has epoch 0 (abandoned[] keeps it
// for "none"), consecutive calls alternate slots (epoch % 2), and a peer one
// call ahead still passes a flag barrier (cuda/flag_window.cuh).
#include <gtest/gtest.h>

#include <cstdint>

#include "epoch_step.cuh"
#include "flag_window.cuh"

namespace peerplan::cuda_kernels {
namespace {

TEST(EpochStep, ByOneAwayFromTheWrap) {
  for (std::uint32_t last : {1u, 2u, 1000u, 0x7FFFFFFFu, 0xFFFFFFFDu}) {
    EXPECT_EQ(epoch_step(last), 1u) << last;
  }
}

TEST(EpochStep, AcrossTheWrapNoCallHasEpochZeroAndSlotsAlternate) {
  std::uint32_t epoch = 0xFFFFFFFFu - 40u;
  bool crossed = false;
  for (int call = 0; call < 80; ++call) {
    const std::uint32_t next = epoch + epoch_step(epoch);
    EXPECT_NE(next, 0u) << "after " << epoch;
    EXPECT_NE(next % 2, epoch % 2) << "after " << epoch << ": the same slot twice in a row";
    // A peer at the next call passes this call's barrier; this call's flag
    // does not pass the next call's.
    EXPECT_TRUE(flag_reached(next, epoch)) << epoch;
    EXPECT_FALSE(flag_reached(epoch, next)) << epoch;
    crossed = crossed || next < epoch;
    epoch = next;
  }
  EXPECT_TRUE(crossed);
  EXPECT_EQ(epoch_step(0xFFFFFFFFu), 3u);  // 2^32 - 1, then 2
}

}  // namespace
}  // namespace peerplan::cuda_kernels
