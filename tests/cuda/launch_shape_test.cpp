// SPDX-License-Identifier: Apache-2.0
// The grids and blocks prepare_all_reduce() gives the one-shot kernels: the
// LL one-shot's blocks of kOneShotLlThreads (a line of 8 data bytes per
// thread), the Lamport one-shot's of 256 while the capped grid holds a
// 16-byte pack per thread and of 512 beyond, both capped at
// PeerSet::one_shot_max_blocks, and describe()'s text of them; every call
// kernel's grid within the epoch words (kMaxCallBlocks), which launch()
// enforces. The add + RMSNorm row kernel streamed through dense, aligned rows of
// at most two packs a thread, the general one otherwise.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "launch_recipe.hpp"
#include "recipe_steps.cuh"

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

TEST(OneShotLamportShape, APackPerThreadInBlocksOf256WhileTheCapAllows) {
  const PeerSet shape = two_ranks(132);
  struct Case {
    ElementType type;
    std::int64_t count;
    unsigned threads;
    unsigned blocks;
  };
  // bf16: 8 elements a pack; f32: 4. 132 blocks of 256 hold 33792 packs.
  for (const Case c : {Case{ElementType::bf16, 8192, 256, 4},          // 16 KiB: 1024 packs
                       Case{ElementType::bf16, 131072, 256, 64},       // 256 KiB
                       Case{ElementType::f32, 65536, 256, 64},         // 256 KiB
                       Case{ElementType::bf16, 33792 * 8, 256, 132},   // the last at 256
                       Case{ElementType::bf16, 33793 * 8, 512, 67},    // one pack more
                       Case{ElementType::bf16, 524288, 512, 128},      // 1 MiB
                       Case{ElementType::bf16, 1 << 22, 512, 132}}) {  // 8 MiB: the cap
    const LaunchRecipe recipe = prepared(Algorithm::one_shot_lamport, shape, c.type, c.count);
    ASSERT_EQ(recipe.step_count, 1);
    EXPECT_EQ(recipe.steps[0].threads, c.threads) << c.count;
    EXPECT_EQ(recipe.steps[0].blocks, c.blocks) << c.count;
  }
}

TEST(OneShotLamportShape, ASmallerCapTakesTheLargerBlocksSooner) {
  // 256 KiB of bf16 (16384 packs) on at most 16 blocks: 256 threads would
  // leave 4 packs a thread, so the blocks are of 512 (2 a thread).
  const LaunchRecipe recipe =
      prepared(Algorithm::one_shot_lamport, two_ranks(16), ElementType::bf16, 131072);
  EXPECT_EQ(recipe.steps[0].threads, 512u);
  EXPECT_EQ(recipe.steps[0].blocks, 16u);
}

// A call kernel's blocks each read the epoch from a word of their own
// (begin_call): the largest grids prepare gives fit those words, and
// launch() refuses a larger one before it touches the GPU.
TEST(CallGrid, TheLargestPreparedGridsFitTheEpochWords) {
  const LaunchRecipe one_shot = prepared(Algorithm::one_shot_ll, two_ranks(kMaxOneShotBlocks),
                                         ElementType::bf16, std::int64_t{1} << 26);
  EXPECT_EQ(one_shot.steps[0].blocks, static_cast<unsigned>(kMaxOneShotBlocks));
  EXPECT_LE(one_shot.steps[0].blocks, static_cast<unsigned>(kMaxCallBlocks));
  PeerSet shape = two_ranks(132);
  shape.cluster_rows = true;
  LaunchRecipe fused;
  ASSERT_EQ(prepare_fused(Algorithm::fused_ll, shape, ElementType::bf16, KernelLayout{}, 1 << 16,
                          64, fused),
            cudaSuccess);
  EXPECT_GT(fused.steps[0].blocks, static_cast<unsigned>(kMaxBlocks));
  EXPECT_LE(fused.steps[0].blocks, static_cast<unsigned>(kMaxCallBlocks));
}

TEST(CallGrid, LaunchRefusesACallKernelBeyondTheEpochWords) {
  LaunchRecipe recipe = prepared(Algorithm::one_shot_ll, two_ranks(132), ElementType::bf16, 512);
  recipe.steps[0].blocks = kMaxCallBlocks + 1;
  PeerSet peers = two_ranks(132);
  EXPECT_EQ(launch(recipe, peers, CallPointers{}, nullptr), cudaErrorInvalidValue);
}

// The fused two-shot's second step: the streamed row kernel, with the
// general one for calls whose tensors are not 16-byte aligned, only for
// rows it takes (dense, whole packs, at most two packs a thread of 1024).
// The hierarchical route's row kernel takes any layout (the two-shot's only
// dense ones).
KernelStep row_norm_of(ElementType type, const KernelLayout& layout, std::int64_t hidden,
                       std::int64_t rows = 64) {
  PeerSet shape = two_ranks(132);
  shape.cluster_rows = true;
  LaunchRecipe recipe;
  const Algorithm algorithm =
      layout.dense ? Algorithm::fused_two_shot_row_norm : Algorithm::node_all_gather_row_norm;
  EXPECT_EQ(prepare_fused(algorithm, shape, type, layout, rows, hidden, recipe), cudaSuccess);
  EXPECT_EQ(recipe.step_count, 2);
  return recipe.steps[1];
}

TEST(RowNormShape, DenseRowsOfUpToTwoPacksAThreadStream) {
  struct Case {
    ElementType type;
    std::int64_t hidden;
    bool streamed;
  };
  for (const Case c : {Case{ElementType::bf16, 7168, true}, Case{ElementType::bf16, 16384, true},
                       Case{ElementType::bf16, 16392, false},  // 2049 packs
                       Case{ElementType::bf16, 7004, false},   // not whole packs
                       Case{ElementType::f16, 5120, true}, Case{ElementType::f32, 8192, true},
                       Case{ElementType::f32, 8196, false}}) {
    const KernelStep step = row_norm_of(c.type, KernelLayout{}, c.hidden);
    EXPECT_EQ(step.unaligned_kernel != nullptr, c.streamed) << c.hidden;
    EXPECT_NE(step.kernel, nullptr);
    EXPECT_NE(step.kernel, step.unaligned_kernel) << c.hidden;
  }
  KernelLayout strided;
  strided.dense = 0;
  strided.rank = 2;
  strided.dims[0] = 64, strided.dims[1] = 7168;
  strided.strides[0] = 8192, strided.strides[1] = 1;
  EXPECT_EQ(row_norm_of(ElementType::bf16, strided, 7168).unaligned_kernel, nullptr);
}

// One row fits any device's clusters; more rows than the largest grid
// (1024 units) outnumber them on any device (without a GPU the occupancy
// query fails and the units stay at 1024): those take blocks of 1024
// threads, as many as the device holds (at most 1024); both programmatic
// where clusters are on. Rows that do not stream keep clusters.
TEST(RowNormShape, StreamedRowsOutnumberingTheClustersRunInBlocks) {
  const KernelStep few = row_norm_of(ElementType::bf16, KernelLayout{}, 7168, 1);
  EXPECT_EQ(few.cluster, 8u);
  EXPECT_EQ(few.blocks, 8u);
  EXPECT_TRUE(few.programmatic);
  const KernelStep many = row_norm_of(ElementType::bf16, KernelLayout{}, 7168, 1 << 20);
  EXPECT_EQ(many.cluster, 1u);
  EXPECT_EQ(many.threads, 1024u);
  EXPECT_GE(many.blocks, 1u);
  EXPECT_LE(many.blocks, 1024u);
  EXPECT_TRUE(many.programmatic);
  EXPECT_NE(many.kernel, few.kernel);
  EXPECT_NE(many.unaligned_kernel, few.unaligned_kernel);
  EXPECT_EQ(row_norm_of(ElementType::bf16, KernelLayout{}, 7004, 1 << 20).cluster, 8u);
}

TEST(RowNormShape, ACallWithAnUnalignedTensorRunsTheGeneralKernel) {
  const KernelStep step = row_norm_of(ElementType::bf16, KernelLayout{}, 7168);
  alignas(16) static char buffer[64];
  EXPECT_EQ(detail::for_tensors(step, {buffer, buffer + 16, buffer + 32}).kernel, step.kernel);
  EXPECT_EQ(detail::for_tensors(step, {buffer, buffer + 2, buffer + 32}).kernel,
            step.unaligned_kernel);
  KernelStep general = step;
  general.unaligned_kernel = nullptr;
  EXPECT_EQ(detail::for_tensors(general, {buffer + 2}).kernel, step.kernel);
}

// The fused two-shot in one kernel: rows that fit it (whole packs, at most
// two packs a thread of 1024), a block of 1024 threads per row of a shard up
// to the per-block flags, its grid the same on every rank (no occupancy
// query), and a kernel for unaligned tensors beside it.
TEST(FusedTwoShotRowsShape, RowsOfWholePacksUpToTwoPacksAThreadFit) {
  EXPECT_TRUE(fused_two_shot_rows_fits(ElementType::bf16, 7168));
  EXPECT_TRUE(fused_two_shot_rows_fits(ElementType::bf16, 16384));   // 2048 packs
  EXPECT_FALSE(fused_two_shot_rows_fits(ElementType::bf16, 16392));  // 2049
  EXPECT_FALSE(fused_two_shot_rows_fits(ElementType::bf16, 7004));   // not whole packs
  EXPECT_TRUE(fused_two_shot_rows_fits(ElementType::f16, 8));
  EXPECT_TRUE(fused_two_shot_rows_fits(ElementType::f32, 8192));
  EXPECT_FALSE(fused_two_shot_rows_fits(ElementType::f32, 8196));
  EXPECT_FALSE(fused_two_shot_rows_fits(ElementType::f32, 2));
  EXPECT_FALSE(fused_two_shot_rows_fits(ElementType::bf16, 0));

  LaunchRecipe recipe;
  EXPECT_EQ(prepare_fused(Algorithm::fused_two_shot_rows, two_ranks(132), ElementType::bf16,
                          KernelLayout{}, 64, 16392, recipe),
            cudaErrorInvalidValue);
  KernelLayout strided;
  strided.dense = 0;
  strided.rank = 2;
  strided.dims[0] = 64, strided.dims[1] = 7168;
  strided.strides[0] = 8192, strided.strides[1] = 1;
  EXPECT_EQ(prepare_fused(Algorithm::fused_two_shot_rows, two_ranks(132), ElementType::bf16,
                          strided, 64, 7168, recipe),
            cudaErrorInvalidValue);
}

TEST(FusedTwoShotRowsShape, ABlockPerRowOfAShardUpToThePerBlockFlags) {
  struct Case {
    int ranks;
    std::int64_t rows;
    unsigned blocks;
  };
  for (const Case c : {Case{2, 1, 1}, Case{2, 3, 2}, Case{2, 256, 128}, Case{2, 255, 128},
                       Case{2, 1024, 128}, Case{3, 7, 3}, Case{8, 5, 1}, Case{4, 300, 75}}) {
    PeerSet shape = two_ranks(132);
    shape.size = c.ranks;
    shape.overlap_launch = c.rows % 2 == 0;
    LaunchRecipe recipe;
    ASSERT_EQ(prepare_fused(Algorithm::fused_two_shot_rows, shape, ElementType::bf16,
                            KernelLayout{}, c.rows, 7168, recipe),
              cudaSuccess);
    ASSERT_EQ(recipe.step_count, 1);
    const KernelStep& step = recipe.steps[0];
    EXPECT_EQ(step.blocks, c.blocks) << c.ranks << " ranks, " << c.rows << " rows";
    EXPECT_LE(step.blocks, static_cast<unsigned>(kTwoShotMaxBlocks));
    EXPECT_EQ(step.threads, 1024u);
    EXPECT_EQ(step.cluster, 1u);
    EXPECT_EQ(step.programmatic, shape.overlap_launch);
    EXPECT_NE(step.kernel, nullptr);
    EXPECT_NE(step.unaligned_kernel, nullptr);
    EXPECT_NE(step.kernel, step.unaligned_kernel);
  }
  LaunchRecipe f32;
  ASSERT_EQ(prepare_fused(Algorithm::fused_two_shot_rows, two_ranks(132), ElementType::f32,
                          KernelLayout{}, 4, 4096, f32),
            cudaSuccess);
  LaunchRecipe bf16;
  ASSERT_EQ(prepare_fused(Algorithm::fused_two_shot_rows, two_ranks(132), ElementType::bf16,
                          KernelLayout{}, 4, 4096, bf16),
            cudaSuccess);
  EXPECT_NE(f32.steps[0].kernel, bf16.steps[0].kernel);
  EXPECT_EQ(describe(bf16), "bf16 fused two-shot by rows: 2 blocks x 1024 threads");
}

}  // namespace
}  // namespace peerplan::cuda_kernels
