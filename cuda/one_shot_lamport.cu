// SPDX-License-Identifier: Apache-2.0
// The one-shot all-reduce by the Lamport protocol (docs/design.md, Lamport):
// the data is its own flag. The protocol - the receive region and its layout,
// the sentinel, arrival, why two parities suffice, what a failure leaves - is
// described in lamport.cuh, whose device helpers this kernel uses; the fused
// all-reduce + add + RMSNorm on the same region is fused_lamport.cu.
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

namespace peerplan::cuda_kernels {
namespace {

// Thread t handles packs t, t + stride, ... (stride = the grid's threads):
// first it pushes all of them to every peer, then it takes all of them in.
// Pushing everything first keeps every store of a large message streaming
// before any thread waits; a small message (one pack per thread) is one
// push, one round of loads, one sum.
// kRanks: 2 for exactly two ranks, 0 for any size (rank_loop.cuh).
template <class T, int kRanks>
__global__ void __launch_bounds__(kThreads)
    one_shot_lamport_kernel(const __grid_constant__ PeerSet p, const T* in, T* out,
                            const __grid_constant__ KernelLayout layout, std::int64_t count) {
  constexpr int kRankBound = RankLoop<kRanks>::kBound;
  const int ranks = RankLoop<kRanks>::count(p.size);
  constexpr int V = Pack<T>::kCount;
  const std::int64_t packs = (count + V - 1) / V;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool in_vec = layout.dense && aligned16(in);
  const bool out_vec = layout.dense && aligned16(out);
  // The own contribution of pack j as the peers see it (mapped the same
  // way, so that every rank sums exactly the same bits).
  auto load_input = [&](std::int64_t j) {
    return j < packs ? without_sentinel<T>(load_tensor(in, layout, in_vec, j * V, count).raw)
                     : make_uint4(0u, 0u, 0u, 0u);
  };

  // The first pack's input load is in flight while begin_call reads the
  // epoch (a small message is one pack per thread: one latency, not two).
  wait_for_previous_kernel();
  const uint4 first = load_input(begin);
  std::uint32_t epoch;
  if (!begin_call(p, epoch)) return;
  const LamportSlots<kRankBound, false> slots(p, epoch);  // not kept: it spilled (lamport.cuh)

  // Push. A short last pack is padded with zeros (load_tensor), which are
  // not the sentinel, so the receiver sees the whole pack arrive. The
  // store order over the peers starts after this rank, to spread the
  // writes of many ranks over the links.
  for (std::int64_t j = begin; j < packs; j += stride) {
    const uint4 data = j == begin ? first : load_input(j);
    for (int k = 1; k < ranks; ++k) {
      const int q = p.rank + k < ranks ? p.rank + k : p.rank + k - ranks;
      store_volatile_pack(slots.to(q) + j, data);
    }
  }

  // Take in. Each thread looks at kPacksAtOnce of its packs per step: the
  // own input and every peer's pack, all loads in flight together; then
  // each pack is summed (waiting only for packs that had not arrived),
  // written out, and its region packs are reset to the sentinel. One pack
  // a step holds as many data bytes per source as the LL kernel's two
  // lines; two packs made ptxas spill (128 registers at 512 threads, the
  // look-ahead is sized for kMaxRanks sources), one needs 84-94. The own
  // input is read again here (a local read) except for the thread's first
  // pack, still in a register: pack j of `out` is written by the thread
  // that read pack j of `in`, after it did, so in == out is fine, strided
  // layouts included (the packs partition the elements).
  constexpr int kPacksAtOnce = 1;
  bool ok = true;
  for (std::int64_t i = begin; ok && i < packs; i += kPacksAtOnce * stride) {
    uint4 own[kPacksAtOnce];
    uint4 seen[kPacksAtOnce][kRankBound];
#pragma unroll
    for (int u = 0; u < kPacksAtOnce; ++u) {
      const std::int64_t j = i + u * stride;
      if (j >= packs) break;
      own[u] = j == begin ? first : load_input(j);
      look_at_arrivals(p, ranks, slots, j, seen[u]);
    }
#pragma unroll
    for (int u = 0; u < kPacksAtOnce; ++u) {
      const std::int64_t j = i + u * stride;
      if (j >= packs) break;
      // The LL one-shot's arithmetic exactly (RankOrderSum), so both
      // protocols give the same bits.
      Pack<T> sum;
      ok = sum_arrivals<T>(p, ranks, epoch, slots, j, own[u], seen[u], sum);
      if (!ok) break;
      store_tensor(out, layout, out_vec, j * V, count, sum);
      reset_arrivals(p, ranks, slots, j);
    }
  }
}

}  // namespace

namespace detail {

// No per-block flags: the grid size is this rank's choice (a pack per
// thread up to the one-shot's largest grid), in blocks of
// kOneShotLamportSmallThreads while that grid holds the message so.
KernelStep one_shot_lamport_step(const PeerSet& shape, ElementType type, std::int64_t count) {
  std::int64_t packs = 0;
  with_element_type(type, [&](auto tag) { packs = packs_for<decltype(tag)>(count); });
  const int threads = packs <= std::int64_t{shape.one_shot_max_blocks} * kOneShotLamportSmallThreads
                          ? kOneShotLamportSmallThreads
                          : kThreads;
  return grid_step(
      type,
      [&](auto tag) {
        using T = decltype(tag);
        return shape.size == 2 ? one_shot_lamport_kernel<T, 2> : one_shot_lamport_kernel<T, 0>;
      },
      [&](auto) { return packs; }, shape.one_shot_max_blocks, shape.overlap_launch, threads);
}

}  // namespace detail

}  // namespace peerplan::cuda_kernels
