// SPDX-License-Identifier: Apache-2.0
// The LL line's flag rule (cuda/ll_flags.cuh), checked on the host: a line
// written for a call carries it and no other call, and stale data of two
// equal words - what a staged kernel leaves in a slot of zeros or ones -
// never passes for any call, at the epochs where the old rule (the epoch
// twice) let it: 0 after the 2^32 wrap, and the bit patterns of f32 1.0
// and of a pair of bf16 ones.
#include <gtest/gtest.h>

#include <cstdint>

#include "ll_flags.cuh"

namespace peerplan::cuda_kernels {
namespace {

constexpr std::uint32_t kEpochs[] = {0u,          1u,          2u,          0x3F800000u,
                                     0x3F803F80u, 0x7FFFFFFFu, 0xFFFFFFFEu, 0xFFFFFFFFu};

TEST(LlFlags, ALineCarriesTheCallItWasWrittenForOnly) {
  for (std::uint32_t epoch : kEpochs) {
    const uint4 line = make_line(uint2{0x12345678u, 0x9ABCDEF0u}, epoch);
    EXPECT_TRUE(carries(line, epoch)) << epoch;
    EXPECT_FALSE(carries(line, epoch + 1u)) << epoch;
    EXPECT_FALSE(carries(line, epoch - 1u)) << epoch;
    EXPECT_EQ(line.x, 0x12345678u);
    EXPECT_EQ(line.z, 0x9ABCDEF0u);
  }
}

TEST(LlFlags, StaleDataOfEqualWordsNeverPassesForACall) {
  for (std::uint32_t epoch : kEpochs) {
    for (std::uint32_t word : {0u, 0x3F800000u, 0x3F803F80u, 0xFFFFFFFFu, epoch}) {
      const uint4 stale{word, word, word, word};
      EXPECT_FALSE(carries(stale, epoch)) << "epoch " << epoch << ", data word " << word;
    }
  }
}

}  // namespace
}  // namespace peerplan::cuda_kernels
