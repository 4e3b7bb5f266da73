// SPDX-License-Identifier: Apache-2.0
// The one-GPU kernel loop's pure decisions (benchmarks/kernel_loop_plan.hpp)
// and its host reference (kernel_loop_reference.hpp).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kernel_loop_plan.hpp"
#include "kernel_loop_reference.hpp"

namespace peerplan::bench::loop {
namespace {

TEST(KernelLoopCases, AllNamesEveryCaseOnce) {
  const auto cases = parse_cases("all");
  ASSERT_EQ(cases.size(), all_cases().size());
  EXPECT_EQ(cases.front().name, "one_shot_ll");
  EXPECT_TRUE(cases.back().fused);
}

TEST(KernelLoopCases, ListKeepsOrderAndDropsRepeats) {
  const auto cases = parse_cases("fused_ll,one_shot_lamport,fused_ll");
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].id, LoopCase::fused_ll);
  EXPECT_TRUE(cases[0].fused);
  EXPECT_EQ(cases[1].id, LoopCase::one_shot_lamport);
  EXPECT_FALSE(cases[1].fused);
}

TEST(KernelLoopCases, UnknownNameSaysWhichAndWhatIsKnown) {
  try {
    parse_cases("one_shot_ll,three_shot");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'three_shot'"), std::string::npos) << what;
    EXPECT_NE(what.find("fused_two_shot_row_norm"), std::string::npos) << what;
  }
  EXPECT_THROW(parse_cases(""), std::invalid_argument);
}

// --iterations solo raises the flags by hand: only kernels that wait on
// nothing else may run so. A pull kernel would read a peer's input address
// that no peer published (null), an LL or Lamport kernel would wait for
// lines no peer wrote.
TEST(KernelLoopCases, SoloOnlyForTheStagedKernels) {
  std::vector<std::string> solo;
  for (const auto& c : all_cases()) {
    if (waits_on_flags_only(c.id)) solo.emplace_back(c.name);
  }
  EXPECT_EQ(solo, (std::vector<std::string>{"two_shot", "fused_staged", "fused_two_shot_row_norm",
                                            "fused_two_shot_rows"}));
}

TEST(KernelLoopSizes, SuffixesArePowersOf1024) {
  const auto sizes = parse_sizes("1K,64k,16M,1G,100");
  ASSERT_EQ(sizes.size(), 5u);
  EXPECT_EQ(sizes[0], 1024);
  EXPECT_EQ(sizes[1], 65536);
  EXPECT_EQ(sizes[2], 16 << 20);
  EXPECT_EQ(sizes[3], std::int64_t{1} << 30);
  EXPECT_EQ(sizes[4], 100);
}

TEST(KernelLoopSizes, BadSizesAreRefused) {
  for (const char* bad : {"", "0", "1K,", "-4", "12X", "K", "1.5M"}) {
    EXPECT_THROW(parse_sizes(bad), std::invalid_argument) << bad;
  }
}

TEST(KernelLoopSizes, GeometricSeriesIncludesBothEnds) {
  const auto sizes = geometric_sizes(1024, 16 << 20, 4);
  ASSERT_EQ(sizes.size(), 8u);
  EXPECT_EQ(sizes.front(), 1024);
  EXPECT_EQ(sizes.back(), 16 << 20);
  EXPECT_EQ(geometric_sizes(1, 1024, 4).size(), 6u);  // 1, 4, ..., 1024
}

TEST(KernelLoopRanks, TwoToEight) {
  const auto ranks = parse_rank_counts("2,4,8");
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(ranks[2], 8);
  EXPECT_THROW(parse_rank_counts("1"), std::invalid_argument);
  EXPECT_THROW(parse_rank_counts("9"), std::invalid_argument);
  EXPECT_THROW(parse_rank_counts("2,x"), std::invalid_argument);
}

TEST(KernelLoopResidency, SharesTheDeviceBetweenRanksAndKernelsInFlight) {
  // 132 SMs x 4 blocks: 528 units.
  EXPECT_EQ(resident_units_per_rank(528, 2, 1), 264);
  EXPECT_EQ(resident_units_per_rank(528, 8, 2), 33);
  EXPECT_EQ(resident_units_per_rank(528, 3, 2), 88);
  // Fewer units than ranks x kernels: nothing fits.
  EXPECT_EQ(resident_units_per_rank(7, 8, 1), 0);
  EXPECT_EQ(resident_units_per_rank(0, 2, 1), 0);
  EXPECT_THROW(resident_units_per_rank(528, 0, 1), std::invalid_argument);
  EXPECT_THROW(resident_units_per_rank(528, 2, 0), std::invalid_argument);
}

TEST(KernelLoopResidency, CapKeepsWholeClusters) {
  EXPECT_EQ(capped_blocks(128, 33, 1), 33u);
  EXPECT_EQ(capped_blocks(20, 33, 1), 20u);     // a small grid stays as it is
  EXPECT_EQ(capped_blocks(1024, 16, 8), 128u);  // 16 clusters of 8
  EXPECT_EQ(capped_blocks(64, 16, 8), 64u);
  EXPECT_EQ(capped_blocks(1, 0, 1), 1u);  // at least one unit
}

TEST(KernelLoopReference, AllReduceSumIsExactAndWrongElementsCount) {
  for (DataType dtype : {DataType::bf16, DataType::f16, DataType::f32}) {
    const std::int64_t count = 1000;
    Bytes sum = all_reduce_input(dtype, count, 0);
    // Summing the inputs as the kernels would gives the reference exactly.
    const Bytes b = all_reduce_input(dtype, count, 1);
    ASSERT_EQ(sum.size(), count * element_size(dtype));
    // Two ranks' inputs differ, so rank 0's input alone is wrong somewhere.
    EXPECT_GT(count_all_reduce_wrong(dtype, sum, count, 2), 0);
    EXPECT_EQ(count_all_reduce_wrong(dtype, sum, count, 1), 0) << dtype_name(dtype);
    EXPECT_NE(sum, b);
  }
}

TEST(KernelLoopReference, DtypeNames) {
  EXPECT_EQ(parse_dtype("bf16"), DataType::bf16);
  EXPECT_EQ(element_size(parse_dtype("f32")), 4u);
  EXPECT_THROW(parse_dtype("fp8"), std::invalid_argument);
}

}  // namespace
}  // namespace peerplan::bench::loop
