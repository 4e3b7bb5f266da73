// SPDX-License-Identifier: Apache-2.0
// The flag barrier's rule (cuda/flag_window.cuh), checked on the host: a
// peer's flag at this rank's call or one ahead passes; a flag behind it -
// however old, across the 2^31 point where a signed difference turned, and
// a block's flags left at 0 by the slab fill - waits.
#include <gtest/gtest.h>

#include <cstdint>

#include "flag_window.cuh"

namespace peerplan::cuda_kernels {
namespace {

constexpr std::uint32_t kTargets[] = {1u,          2u,          0x7FFFFFFFu, 0x80000000u,
                                      0x80000001u, 0xFFFFFFFEu, 0xFFFFFFFFu, 0u};

TEST(FlagWindow, AFlagAtTheCallOrOneAheadPasses) {
  for (std::uint32_t target : kTargets) {
    EXPECT_TRUE(flag_reached(target, target)) << target;
    EXPECT_TRUE(flag_reached(target + 1u, target)) << target;  // across the wrap too
  }
}

TEST(FlagWindow, AFlagBehindTheCallWaitsHoweverOld) {
  for (std::uint32_t target : kTargets) {
    for (std::uint64_t gap : {1ull, 2ull, 1000ull, (1ull << 31) - 1, 1ull << 31, (1ull << 31) + 1,
                              (1ull << 32) - kFlagLead - 1}) {
      const auto stale = static_cast<std::uint32_t>(target - gap);
      EXPECT_FALSE(flag_reached(stale, target)) << "target " << target << ", gap " << gap;
    }
  }
  // A block's flags as the slab fill left them, once the calls passed 2^31.
  EXPECT_FALSE(flag_reached(0u, 0x80000001u));
  EXPECT_FALSE(flag_reached(0u, 0xF0000000u));
}

}  // namespace
}  // namespace peerplan::cuda_kernels
