// SPDX-License-Identifier: Apache-2.0
// PEERPLAN_TEST_EPOCH_START (src/transport/cuda/test_epoch_start.hpp), the
// GPU wrap test's starting epoch count: its parsing, and the word it seeds.
#include "transport/cuda/test_epoch_start.hpp"

#include <gtest/gtest.h>

#include "collective_kernels.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::transport::cuda {
namespace {

TEST(TestEpochStart, UnsetOrEmptyStartsAtZero) {
  EXPECT_EQ(parse_test_epoch_start(nullptr), std::nullopt);
  EXPECT_EQ(parse_test_epoch_start(""), std::nullopt);
}

TEST(TestEpochStart, TakesEveryCountBelowTheWrap) {
  EXPECT_EQ(parse_test_epoch_start("0"), 0u);
  EXPECT_EQ(parse_test_epoch_start("4294967266"), 4294967266u);
  EXPECT_EQ(parse_test_epoch_start("4294967295"), 4294967295u);
}

TEST(TestEpochStart, RefusesWhatIsNotACountBelowTheWrap) {
  for (const char* bad : {"4294967296", "-1", "12x", " 5", "0x10", "1e3"}) {
    try {
      parse_test_epoch_start(bad);
      ADD_FAILURE() << bad << " was taken";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("PEERPLAN_TEST_EPOCH_START"), std::string::npos) << bad;
      EXPECT_NE(std::string(e.what()).find("unset it"), std::string::npos) << bad;
    }
  }
}

TEST(TestEpochStart, SeedsAnAlignedWordOfTheSignalArea) {
  const std::size_t offset = cuda_kernels::one_block_call_count_offset();
  EXPECT_EQ(offset % sizeof(std::uint32_t), 0u);
  EXPECT_LE(offset + sizeof(std::uint32_t), cuda_kernels::kSignalAreaBytes);
  // Past the per-block counts (kMaxCallBlocks words before it).
  EXPECT_GE(offset, cuda_kernels::kMaxCallBlocks * sizeof(std::uint32_t));
}

}  // namespace
}  // namespace peerplan::transport::cuda
