// SPDX-License-Identifier: Apache-2.0
// The grids and blocks prepare_all_reduce() gives the one-shot kernels: the
// LL one-shot's blocks of kOneShotLlThreads (a line of 8 data bytes per
// thread), the Lamport one-shot's of 512 (a 16-byte pack per thread), both
// capped at PeerSet::one_shot_max_blocks, and describe()'s text of them.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "launch_recipe.hpp"

namespace peerplan::cuda_kernels {
namespace {

PeerSet two_ranks(int max_blocks) {
  PeerSet shape;
  shape.size = 2;
  shape.one_shot_max_blocks = max_blocks;
  shape.lamport_max_bytes = std::uint64_t{64} << 20;
  return shape;
}

LaunchRecipe prepared(Algorithm algorithm, const PeerSet& shape, ElementType type,
                      std::int64_t count) {
  LaunchRecipe recipe;
  EXPECT_EQ(prepare_all_reduce(algorithm, shape, type, KernelLayout{}, count, recipe), cudaSuccess);
  return recipe;
}

TEST(OneShotLlShape, ALineOfEightBytesPerThreadInBlocksOf256) {
  const PeerSet shape = two_ranks(132);
  struct Case {
    ElementType type;
    std::int64_t count;
    unsigned blocks;
  };
  // bf16: 4 elements a line; f32: 2.
  for (const Case c : {Case{ElementType::bf16, 512, 1},           // 1 KiB: 128 lines
                       Case{ElementType::bf16, 1024, 1},          // 2 KiB: 256 lines
                       Case{ElementType::bf16, 1028, 2},          // one line more
                       Case{ElementType::bf16, 8192, 8},          // 16 KiB
                       Case{ElementType::bf16, 32768, 32},        // 64 KiB
                       Case{ElementType::f16, 32768, 32},         // 64 KiB
                       Case{ElementType::f32, 16384, 32},         // 64 KiB
                       Case{ElementType::bf16, 1 << 22, 132}}) {  // 8 MiB: the cap
    const LaunchRecipe recipe = prepared(Algorithm::one_shot_ll, shape, c.type, c.count);
    ASSERT_EQ(recipe.step_count, 1);
    EXPECT_EQ(recipe.steps[0].threads, 256u) << c.count;
    EXPECT_EQ(recipe.steps[0].blocks, c.blocks) << c.count;
  }
}

TEST(OneShotLlShape, TheGridCapIsTheShapes) {
  const LaunchRecipe recipe = prepared(Algorithm::one_shot_ll, two_ranks(8), ElementType::bf16,
                                       32768);  // 64 KiB: 32 blocks uncapped
  EXPECT_EQ(recipe.steps[0].blocks, 8u);
  EXPECT_EQ(recipe.steps[0].threads, 256u);
}

TEST(OneShotLlShape, DescribeNamesTheBlockSize) {
  PeerSet shape = two_ranks(132);
  shape.overlap_launch = true;
  const LaunchRecipe recipe = prepared(Algorithm::one_shot_ll, shape, ElementType::bf16, 32768);
  EXPECT_EQ(describe(recipe), "bf16 one-shot LL: 32 blocks x 256 threads, PDL");
}

TEST(OneShotLamportShape, APackPerThreadInBlocksOf512) {
  const PeerSet shape = two_ranks(132);
  // 256 KiB of bf16: 16384 packs of 8 elements.
  const LaunchRecipe recipe =
      prepared(Algorithm::one_shot_lamport, shape, ElementType::bf16, 131072);
  EXPECT_EQ(recipe.steps[0].threads, 512u);
  EXPECT_EQ(recipe.steps[0].blocks, 32u);
}

}  // namespace
}  // namespace peerplan::cuda_kernels
