// SPDX-License-Identifier: Apache-2.0
// The two-shot shard geometry, in one place for the host and the device:
// the push two-shot kernel (two_shot.cu), the pull two-shot kernel
// (pull_kernels.cu), their launch shapes (the grid has a thread per pack of
// a shard), the fused op's two-shot + row norm path (launch_recipe.cu) and
// the slab sizing's bound (slab_sizing.cu) all take their numbers from here.
//
// A message of `count` elements on `ranks` ranks is cut into shards of
// ceil(count / ranks) elements rounded up to whole packs (a pack is 16
// bytes: 8 f16/bf16 or 4 f32 elements), so that every shard starts on a
// pack boundary and the kernels move whole 16-byte packs. Shard s covers
// [s * shard, min((s + 1) * shard, count)): the last shards may be short or
// empty when the padding adds up (e.g. 9 elements, 4 ranks, packs of 8:
// shards of 8, so ranks 0 and 1 hold 8 and 1 elements, ranks 2 and 3 none).
//
// Plain C++ as well (no CUDA-only syntax outside the macro), so host code
// compiled by the host compiler may include it.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define PEERPLAN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define PEERPLAN_HOST_DEVICE inline
#endif

namespace peerplan::cuda_kernels {

// Elements per shard: ceil(count / ranks), rounded up to a multiple of
// pack_elements. ranks >= 1, count >= 0, pack_elements >= 1.
PEERPLAN_HOST_DEVICE constexpr std::int64_t shard_elements_of(std::int64_t count, int ranks,
                                                              int pack_elements) {
  return ((count + ranks - 1) / ranks + pack_elements - 1) / pack_elements * pack_elements;
}

template <int kPackElements>
PEERPLAN_HOST_DEVICE constexpr std::int64_t shard_elements(std::int64_t count, int ranks) {
  static_assert(kPackElements >= 1);
  return shard_elements_of(count, ranks, kPackElements);
}

// Rank `rank`'s elements [begin, end) of a message of `count` elements cut
// into shards of `shard` elements (shard_elements): clipped to the
// message, so an empty shard is begin == end == count.
struct ShardRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

PEERPLAN_HOST_DEVICE constexpr ShardRange shard_range(std::int64_t count, std::int64_t shard,
                                                      int rank) {
  const std::int64_t begin = rank * shard < count ? rank * shard : count;
  const std::int64_t end = begin + shard < count ? begin + shard : count;
  return ShardRange{begin, end};
}

// The hierarchical route's mark (node_shards.cu): in a rank's buffer of its
// node's shard (element 0 = the range's begin), the element after the last
// pack the range touches, which no pack of the shard overwrites. The step
// between nodes sums the elements before it and the mark: offset + 1.
PEERPLAN_HOST_DEVICE constexpr std::int64_t node_mark_offset(ShardRange range, int pack_elements) {
  return (range.end - range.begin + pack_elements - 1) / pack_elements * pack_elements;
}

// Examples the kernels rely on (computed at compile time).
static_assert(shard_elements<8>(9, 4) == 8 && shard_range(9, 8, 0).end == 8 &&
              shard_range(9, 8, 1).begin == 8 && shard_range(9, 8, 1).end == 9 &&
              shard_range(9, 8, 2).begin == 9 && shard_range(9, 8, 3).end == 9);
static_assert(node_mark_offset(shard_range(9, 8, 0), 8) == 8 &&
              node_mark_offset(shard_range(9, 8, 1), 8) == 8 &&
              node_mark_offset(shard_range(9, 8, 2), 8) == 0);
static_assert(shard_elements<8>(4096, 2) == 2048 && shard_elements<8>(4097, 2) == 2056 &&
              shard_elements<4>(1, 8) == 4 && shard_elements<4>(100, 3) == 36 &&
              shard_elements<8>(1000, 3) == 336 && shard_elements<4>(1000, 3) == 336);

}  // namespace peerplan::cuda_kernels
