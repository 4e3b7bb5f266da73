// SPDX-License-Identifier: Apache-2.0
// The two-shot all-reduce by the Lamport protocol: reduce-scatter, then
// all-gather, both through the Lamport region (lamport.cuh: the data is its
// own flag), so neither phase has a barrier or a flag word. Any layout:
// the packs are the message's logical packs, read and written through the
// layout like the one-shot's.
//
// Shards are the two-shot's (shard_geometry.cuh): shard q covers elements
// [q * shard, min((q + 1) * shard, count)), a whole number of packs. Source
// r's sub-slot in owner o's region holds, for one call, two halves of
// shard / V packs each:
//   - packs [0, shard / V): r's input of shard o (the reduce-scatter);
//   - packs [shard / V, 2 * shard / V): shard r reduced by r (the gather).
// Both travel from r to o, so the one-shot's sub-slot map serves both, and
// a sub-slot for a message of M bytes holds its two-shot too: two shards
// are at most M plus a few packs (slab_sizing.cu sizes for both).
//
// Thread t handles pack j = t, t + stride, ... of every shard:
//   1. push: pack j of every peer q's shard of `in` into q's region;
//   2. reduce: pack j of its own shard - its own input and every peer's
//      pack from phase 1, fp32 in rank order 0..n-1 with one rounding (the
//      staged two-shot's sums, so the same bits) - into `out`, and pushed
//      to every peer's gather half;
//   3. gather: pack j of every peer's reduced shard into `out`.
// Every pack read from the region is put back to the sentinel after its
// read, by the thread that read it. A phase only waits for data that the
// peers send in an earlier phase, and phase 1 never waits: so no wait
// depends on a later one, and a rank whose whole grid is resident (at most
// one block per multiprocessor, as the one-shot) always progresses. Why two
// parities suffice is lamport.cuh's chain, unchanged: each call takes in
// every pack every peer sent it (phase 2 and 3) before it ends.
//
// Sentinels: a sent pack never holds the all-ones pattern (without_sentinel
// maps an all-ones input element to another NaN). A reduced element is
// never all ones either (a NaN sum is the GPU's canonical NaN), but it is
// mapped the same way before it is stored here and sent, so every rank
// writes the same bits whatever happens.
//
// Failure: every wait is take_pack's, bounded like every other; a failed
// call leaves the region as lamport.cuh describes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "element_ops.cuh"
#include "lamport.cuh"
#include "launch_recipe.hpp"
#include "launch_shape.cuh"
#include "rank_loop.cuh"
#include "recipe_steps.cuh"
#include "shard_geometry.cuh"

namespace peerplan::cuda_kernels {
namespace {

// Pack j of shard q: its first element, and whether the shard has it.
struct ShardPack {
  std::int64_t first;
  bool exists;
};

template <int V>
__device__ __forceinline__ ShardPack shard_pack(std::int64_t count, std::int64_t shard, int q,
                                                std::int64_t j) {
  const ShardRange range = shard_range(count, shard, q);
  const std::int64_t first = range.begin + j * V;
  return {first, first < range.end};
}

// kRanks: 2 for exactly two ranks, 0 for any size (rank_loop.cuh).
template <class T, int kRanks>
__global__ void __launch_bounds__(kThreads)
    two_shot_lamport_kernel(const __grid_constant__ PeerSet p, const T* in, T* out,
                            const __grid_constant__ KernelLayout layout, std::int64_t count) {
  constexpr int kRankBound = RankLoop<kRanks>::kBound;
  const int ranks = RankLoop<kRanks>::count(p.size);
  constexpr int V = Pack<T>::kCount;
  const std::int64_t shard = shard_elements<V>(count, ranks);
  const std::int64_t shard_packs = shard / V;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool in_vec = layout.dense && aligned16(in);
  const bool out_vec = layout.dense && aligned16(out);
  std::uint32_t epoch;
  if (!begin_call(p, epoch)) return;
  const LamportSlots<kRankBound> slots(p, epoch);

  // 1. Push. A short last pack is padded with zeros (load_tensor), which
  // are not the sentinel. Peers in the order after this rank, to spread
  // the writes of many ranks over the links.
  for (std::int64_t j = begin; j < shard_packs; j += stride) {
    for (int k = 1; k < ranks; ++k) {
      const int q = p.rank + k < ranks ? p.rank + k : p.rank + k - ranks;
      const ShardPack at = shard_pack<V>(count, shard, q, j);
      if (!at.exists) continue;
      const uint4 data = without_sentinel<T>(load_tensor(in, layout, in_vec, at.first, count).raw);
      store_volatile_pack(slots.to(q) + j, data);
    }
  }

  // 2. Reduce this rank's shard. The peers' packs are loaded together
  // first (their latencies overlap), then waited for one by one.
  const uint4 sentinel = sentinel_pack();
  bool ok = true;
  for (std::int64_t j = begin; ok && j < shard_packs; j += stride) {
    const ShardPack at = shard_pack<V>(count, shard, p.rank, j);
    if (!at.exists) break;  // the packs past the shard's end come later in j
    const uint4 own = load_tensor(in, layout, in_vec, at.first, count).raw;
    uint4 seen[kRankBound];
    look_at_arrivals(p, ranks, slots, j, seen);
    Pack<T> sum;
    ok = sum_arrivals<T>(p, ranks, epoch, slots, j, own, seen, sum);
    if (!ok) break;
    sum.raw = without_sentinel<T>(sum.raw);
    for (int k = 1; k < ranks; ++k) {
      const int q = p.rank + k < ranks ? p.rank + k : p.rank + k - ranks;
      store_volatile_pack(slots.to(q) + shard_packs + j, sum.raw);
    }
    store_tensor(out, layout, out_vec, at.first, count, sum);
    reset_arrivals(p, ranks, slots, j);
  }

  // 3. Gather the peers' reduced shards. Writing pack j of shard q of
  // `out` after this thread read pack j of shard q of `in` (phase 1) is
  // what makes in == out safe.
  for (std::int64_t j = begin; ok && j < shard_packs; j += stride) {
    uint4 seen[kRankBound];
#pragma unroll
    for (int q = 0; q < kRankBound; ++q) {
      if (q >= ranks) break;
      if (q != p.rank && shard_pack<V>(count, shard, q, j).exists) {
        seen[q] = load_volatile_pack(slots.from(q) + shard_packs + j);
      }
    }
#pragma unroll
    for (int q = 0; q < kRankBound; ++q) {
      if (q >= ranks) break;
      const ShardPack at = shard_pack<V>(count, shard, q, j);
      if (q == p.rank || !at.exists) continue;
      uint4* const pack = slots.from(q) + shard_packs + j;
      if (!take_pack<T>(p, pack, q, epoch, seen[q])) {
        ok = false;
        break;
      }
      Pack<T> reduced;
      reduced.raw = seen[q];
      store_tensor(out, layout, out_vec, at.first, count, reduced);
      store_volatile_pack(pack, sentinel);
    }
  }
}

}  // namespace

namespace detail {

// No per-block flags: the grid is this rank's choice, a thread per pack of
// a shard up to the one-shot's largest grid (one block per multiprocessor:
// every block resident, which the waits need).
KernelStep two_shot_lamport_step(const PeerSet& shape, ElementType type, std::int64_t shard) {
  return grid_step(
      type,
      [&](auto tag) {
        using T = decltype(tag);
        return shape.size == 2 ? two_shot_lamport_kernel<T, 2> : two_shot_lamport_kernel<T, 0>;
      },
      [&](auto tag) { return packs_for<decltype(tag)>(shard); }, shape.one_shot_max_blocks,
      shape.overlap_launch);
}

}  // namespace detail

}  // namespace peerplan::cuda_kernels
