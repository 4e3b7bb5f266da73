// SPDX-License-Identifier: Apache-2.0
// The Lamport fused op (fused_lamport.cu) for short rows: a row per cluster
// in which every thread holds at most two packs of the row (those the
// general kernel keeps in registers), on dense, 16-byte aligned tensors.
// The same region, the same packs per thread, the same all-or-nothing row
// and the same arithmetic as fused_lamport_kernel, so the two give the same
// bits and ranks may run either (each rank's own choice: its pointers'
// alignment). As fused_ll_short.cu does for the LL kernel, it drops the
// loops, the rows' second pass and the element fallbacks that such a row
// never takes: at a few rows every instruction is on the path.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "element_ops.cuh"
#include "lamport.cuh"
#include "launch_shape.cuh"
#include "rank_loop.cuh"
#include "recipe_steps.cuh"
#include "rms_norm_row.cuh"
#include "short_row.cuh"

namespace peerplan::cuda_kernels {
namespace {

// Parameters as fused_lamport_kernel's (launch() passes the same); the
// layout is dense here (fused_lamport_step checks), so it goes unused.
// kPacks: the packs a thread holds of a row (short_row_packs_per_thread).
// The two-pack variant for any size is bounded to 4 blocks per SM, as the
// general kernel is: unbounded it fit 3 and ran slower from 16 rows on the
// kernel loop (benchmarks/kernel-loop.md). The one-pack two-rank variant
// needs 64 registers unbounded (8 blocks per SM) since it keeps its
// sub-slots (LamportSlots); bounded to 8 blocks, ptxas spilled. 0: no bound.
template <class T, int kRanks, int kPacks>
__global__ void __launch_bounds__(kSplitThreads, kRanks == 0 && kPacks == 2 ? 4 : 0)
    fused_lamport_short_kernel(const __grid_constant__ PeerSet p, T* inout, T* residual,
                               const T* weight, float eps, const __grid_constant__ KernelLayout,
                               std::int64_t rows, std::int64_t hidden) {
  __shared__ RowShared shared;
  constexpr int V = Pack<T>::kCount;
  constexpr int kRankBound = RankLoop<kRanks>::kBound;
  const int ranks = RankLoop<kRanks>::count(p.size);
  RowInCluster row_sum(shared.slots, shared.barriers);
  // This thread's packs of every row (prepare_fused keeps every pack index
  // of the region below 2^31).
  const ShortRowThread me = short_row_thread(row_sum.split(), hidden, V);
  const int row_count = static_cast<int>(rows);
  auto row_start = [&](int row) { return static_cast<std::int64_t>(row) * hidden; };
  // The own pack as the peers sum it (lamport.cuh: no sentinel).
  auto input_pack = [&](int row, int k) {
    return without_sentinel<T>(
        *reinterpret_cast<const uint4*>(inout + row_start(row) + me.pack_of(k) * V));
  };

  // The first row's packs are loaded while begin_call reads the epoch. A
  // block of a cluster must not leave alone (see fused_lamport_kernel): a broken
  // transport is carried through the first row's exchange.
  uint4 early[kPacks];
  std::uint32_t epoch;
  bool failed = !begin_short_rows(p, me, row_count, input_pack, early, epoch);
  const LamportSlots<kRankBound> slots(p, epoch);

  // The push: this thread's packs of each row into every peer's region, the
  // peers after this rank first (as fused_lamport_kernel spreads the writes).
  if (me.has(0)) {
    for (int row = me.unit; !failed && row < row_count; row += me.units) {
#pragma unroll
      for (int k = 0; k < kPacks; ++k) {
        if (k > 0 && !me.has(k)) break;
        const uint4 data = row == me.unit ? early[k] : input_pack(row, k);
        const int at = row * me.packs + me.pack_of(k);
        for (int n = 1; n < ranks; ++n) {
          const int q = p.rank + n < ranks ? p.rank + n : p.rank + n - ranks;
          store_volatile_pack(slots.to(q) + at, data);
        }
      }
    }
  }

  Pack<T> w[kPacks];
  load_short_row_weight(me, weight, w);
  for (int row = me.unit; row < row_count; row += me.units) {
    const std::int64_t start = row_start(row);
    auto at = [&](int k) { return row * me.packs + me.pack_of(k); };
    float squares = 0.0f;
    Pack<T> r[kPacks];
    if (me.has(0)) {
      Pack<T> old[kPacks];
      uint4 own[kPacks];
      // A first look at every peer's pack, all loads in flight at once: of
      // both packs at two ranks; over more ranks of one pack at a time, as
      // the general kernel (both at once took 168 registers a thread).
      constexpr int kAhead = kRanks == 2 ? kPacks : 1;
      uint4 seen[kAhead][kRankBound];
#pragma unroll
      for (int k = 0; k < kPacks; ++k) {
        if (k > 0 && !me.has(k)) break;
        old[k].raw = *reinterpret_cast<const uint4*>(residual + start + me.pack_of(k) * V);
        own[k] = row == me.unit ? early[k] : input_pack(row, k);
        if (k < kAhead) look_at_arrivals(p, ranks, slots, at(k), seen[k]);
      }
      // The packs in order, each summed in rank order: the general kernel's
      // order of the sum of squares too.
#pragma unroll
      for (int k = 0; k < kPacks; ++k) {
        if (k > 0 && !me.has(k)) break;
        if (k >= kAhead) look_at_arrivals(p, ranks, slots, at(k), seen[k % kAhead]);
        uint4(&looked)[kRankBound] = seen[k % kAhead];
        RankOrderSum<T> sum;
#pragma unroll
        for (int q = 0; q < kRankBound; ++q) {
          if (q >= ranks) break;
          Pack<T> in;
          if (q == p.rank) {
            in.raw = own[k];
          } else {
            if (!failed) {
              failed = !take_pack<T>(p, slots.from(q) + at(k), q, epoch, looked[q]);
            }
            in.raw = looked[q];
          }
          sum.add(in);
        }
        float s[V];
        round_to_element<T>(sum.acc, s);
        residual_pack<T>(s, old[k], r[k], V, squares);
      }
    }
    // All or nothing (add_rms_norm_part_whole): nothing of the row is
    // written unless every thread of the cluster got every pack.
    const float total = row_sum.row_total(squares, failed);
    if (failed) return;  // every thread of the cluster alike
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      if (me.has(k)) {
        *reinterpret_cast<uint4*>(residual + start + me.pack_of(k) * V) = r[k].raw;
        *reinterpret_cast<uint4*>(inout + start + me.pack_of(k) * V) =
            normalized_pack<T>(r[k], w[k], inv_rms_of(total, hidden, eps)).raw;
        // Ready for call epoch + 2 (lamport.cuh): after this thread's last
        // reads of these packs (program order, same addresses).
        reset_arrivals(p, ranks, slots, at(k));
      }
    }
  }
}

}  // namespace

namespace detail {

const void* fused_lamport_short_kernel_for(ElementType type, bool two_ranks, int packs_per_thread) {
  return short_kernel_for(type, two_ranks, packs_per_thread, [](auto tag, auto ranks, auto packs) {
    return fused_lamport_short_kernel<decltype(tag), decltype(ranks)::value,
                                      decltype(packs)::value>;
  });
}

}  // namespace detail

}  // namespace peerplan::cuda_kernels
