// SPDX-License-Identifier: Apache-2.0
// The phases of the push two-shot all-reduce, shared by the kernels that
// run them: the single-node two-shot (two_shot.cu: all three in one
// kernel) and the hierarchical route's pair (node_shards.cu: the first two
// before the step between nodes, the rest after it). Device code only.
//
// Shard s covers [s * shard, min((s + 1) * shard, count)), shard a whole
// number of packs (shard_geometry.cuh). Every rank pushes shard s of its
// input into rank s's slot (sub-slot <own rank>); rank s reduces its shard
// from its own slot, fp32 in rank order 0..n-1 with one rounding, and
// pushes the result into every peer's slot (sub-slot s, at the shard's
// positions, unused by the first phase); the all-gather's reads are local.
// Block b handles pack j of every shard for the same j on every rank, so
// per-block flags order exactly the data each block needs. Loads of a step
// come first, then its stores: the compiler may not move a load past a
// store that could alias it, so this is spelled out.
#pragma once

#include <cstdint>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "element_ops.cuh"

namespace peerplan::cuda_kernels::two_shot {

// The packs this thread handles: j = begin, begin + stride, ... < packs.
struct PackWalk {
  std::int64_t begin;
  std::int64_t stride;
};

__device__ __forceinline__ PackWalk pack_walk() {
  return {static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
          static_cast<std::int64_t>(gridDim.x) * blockDim.x};
}

// Phase 1: shard s of `in` into rank s's slot, sub-slot <own rank>.
template <class T>
__device__ __forceinline__ void push_shards(const PeerSet& p, const T* in,
                                            const KernelLayout& layout, bool in_vec,
                                            std::int64_t count, std::int64_t shard,
                                            std::uint32_t epoch, PackWalk walk) {
  constexpr int V = Pack<T>::kCount;
  const std::int64_t shard_packs = shard / V;
  for (std::int64_t j = walk.begin; j < shard_packs; j += walk.stride) {
    Pack<T> mine[kMaxRanks];
#pragma unroll
    for (int s = 0; s < kMaxRanks; ++s) {
      const std::int64_t first = s * shard + j * V;
      if (s < p.size && first < count) mine[s] = load_tensor(in, layout, in_vec, first, count);
    }
#pragma unroll
    for (int s = 0; s < kMaxRanks; ++s) {
      const std::int64_t first = s * shard + j * V;
      if (s < p.size && first < count) {
        *reinterpret_cast<uint4*>(data_of<T>(p, s, p.rank, epoch) + first) = mine[s].raw;
      }
    }
  }
}

// Sum of every source's sub-slot of this rank's own slot at element
// `first` (a pack boundary): fixed rank order, one rounding, local reads,
// all issued before the first add. kRanks: rank_loop.cuh; at two ranks own
// + peer, which is the rank-order sum on both (two_rank_sum).
template <class T, int kRanks = 0>
__device__ __forceinline__ Pack<T> reduce_sources(const PeerSet& p, std::uint32_t epoch,
                                                  std::int64_t first) {
  if constexpr (kRanks == 2) {
    return two_rank_sum<T>(
               *reinterpret_cast<const uint4*>(data_of<T>(p, p.rank, p.rank, epoch) + first),
               *reinterpret_cast<const uint4*>(data_of<T>(p, p.rank, 1 - p.rank, epoch) + first))
        .rounded();
  }
  Pack<T> in[kMaxRanks];
#pragma unroll
  for (int r = 0; r < kMaxRanks; ++r) {
    if (r < p.size)
      in[r].raw = *reinterpret_cast<const uint4*>(data_of<T>(p, p.rank, r, epoch) + first);
  }
  return sum_in_rank_order(in, p.size);
}

// Phase 2's second half: this rank's reduced pack at `first` into every
// peer's slot (sub-slot <own rank>), for their all-gather.
template <class T, int kRanks = 0>
__device__ __forceinline__ void push_reduced(const PeerSet& p, std::uint32_t epoch,
                                             std::int64_t first, const Pack<T>& sum) {
  if constexpr (kRanks == 2) {
    *reinterpret_cast<uint4*>(data_of<T>(p, 1 - p.rank, p.rank, epoch) + first) = sum.raw;
    return;
  }
  for (int q = 0; q < p.size; ++q) {
    if (q != p.rank) *reinterpret_cast<uint4*>(data_of<T>(p, q, p.rank, epoch) + first) = sum.raw;
  }
}

// Phase 3, after the 'reduced' barrier: every other rank's reduced shard
// from this rank's own slot into `out`.
template <class T>
__device__ __forceinline__ void gather_shards(const PeerSet& p, T* out, const KernelLayout& layout,
                                              bool out_vec, std::int64_t count, std::int64_t shard,
                                              std::uint32_t epoch, PackWalk walk) {
  constexpr int V = Pack<T>::kCount;
  const std::int64_t shard_packs = shard / V;
  for (std::int64_t j = walk.begin; j < shard_packs; j += walk.stride) {
    Pack<T> sums[kMaxRanks];
#pragma unroll
    for (int s = 0; s < kMaxRanks; ++s) {
      const std::int64_t first = s * shard + j * V;
      if (s < p.size && s != p.rank && first < count) {
        sums[s].raw = *reinterpret_cast<const uint4*>(data_of<T>(p, p.rank, s, epoch) + first);
      }
    }
#pragma unroll
    for (int s = 0; s < kMaxRanks; ++s) {
      const std::int64_t first = s * shard + j * V;
      if (s < p.size && s != p.rank && first < count)
        store_tensor(out, layout, out_vec, first, count, sums[s]);
    }
  }
}

// Phase 1 and its barrier: false (on every thread of the block) when the
// wait failed, and the kernel must return.
template <class T>
__device__ __forceinline__ bool push_shards_then_wait(const PeerSet& p, const T* in,
                                                      const KernelLayout& layout,
                                                      std::int64_t count, std::int64_t shard,
                                                      std::uint32_t epoch, PackWalk walk) {
  push_shards(p, in, layout, layout.dense && aligned16(in), count, shard, epoch, walk);
  __syncthreads();
  signal_peers(p, FlagRow::arrive, epoch);
  return wait_peers(p, signals_of(p, p.rank)->arrive[blockIdx.x], epoch, Phase::arrive, epoch);
}

// After this rank pushed its reduced shard: the 'reduced' barrier, phase 3
// and the end of the call (the last words of the kernel).
template <class T>
__device__ __forceinline__ void wait_then_gather(const PeerSet& p, T* out,
                                                 const KernelLayout& layout, bool out_vec,
                                                 std::int64_t count, std::int64_t shard,
                                                 std::uint32_t epoch, PackWalk walk) {
  __syncthreads();
  signal_peers(p, FlagRow::reduced, epoch);
  if (!wait_peers(p, signals_of(p, p.rank)->reduced[blockIdx.x], epoch, Phase::reduced, epoch)) {
    return;
  }
  gather_shards(p, out, layout, out_vec, count, shard, epoch, walk);
}

}  // namespace peerplan::cuda_kernels::two_shot
