// SPDX-License-Identifier: Apache-2.0
// The LL fused op (fused_ll.cu) for short rows: a row per cluster in which
// every thread holds at most two packs of the row (those the general kernel
// keeps in registers), on dense, 16-byte aligned tensors. The same lines in
// the same slots, the same packs per thread and the same arithmetic as
// fused_ll_kernel, so the two give the same bits and ranks may run either
// (the choice is each rank's own: its pointers' alignment). What it saves
// is instructions: at a few rows each block of the cluster has one warp per
// scheduler, so every instruction's latency is on the path, and the general
// kernel spends most of its instructions on loops, 64-bit indices and
// fallbacks that such a row never takes.
#include <cuda_bf16.h>

#include <cstdint>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "element_ops.cuh"
#include "launch_shape.cuh"
#include "ll_lines.cuh"
#include "rank_loop.cuh"
#include "recipe_steps.cuh"
#include "rms_norm_row.cuh"
#include "short_row.cuh"

namespace peerplan::cuda_kernels {
namespace {

// Parameters as fused_ll_kernel's (launch() passes the same); the layout is
// dense here (fused_ll_step checks), so it goes unused. kPacks: the packs a
// thread holds of a row (short_row_packs_per_thread).
template <class T, int kRanks, int kPacks>
__global__ void __launch_bounds__(kSplitThreads)
    fused_ll_short_kernel(const __grid_constant__ PeerSet p, T* inout, T* residual, const T* weight,
                          float eps, const __grid_constant__ KernelLayout, std::int64_t rows,
                          std::int64_t hidden) {
  __shared__ RowShared shared;
  constexpr int V = Pack<T>::kCount;
  constexpr int kRankBound = RankLoop<kRanks>::kBound;
  const int ranks = RankLoop<kRanks>::count(p.size);
  RowInCluster row_sum(shared.slots, shared.barriers);
  // This thread's packs of every row (fused_ll_step keeps every line index
  // below 2^31).
  const ShortRowThread me = short_row_thread(row_sum.split(), hidden, V);
  const int row_lines = 2 * me.packs;
  auto row_start = [&](int row) { return static_cast<std::int64_t>(row) * hidden; };
  auto input_pack = [&](int row, int k) {
    return *reinterpret_cast<const uint4*>(inout + row_start(row) + me.pack_of(k) * V);
  };

  // The first row's packs are loaded while begin_call reads the epoch. A
  // block of a cluster must not leave alone (see fused_ll_kernel): a broken
  // transport is carried through the first row's exchange.
  uint4 early[kPacks];
  std::uint32_t epoch;
  bool failed = !begin_short_rows(p, me, rows, input_pack, early, epoch);

  // The push: this thread's packs of each row as their two lines, to every peer.
  if (me.has(0)) {
    for (int row = me.unit; !failed && row < rows; row += me.units) {
#pragma unroll
      for (int k = 0; k < kPacks; ++k) {
        if (k > 0 && !me.has(k)) break;
        const uint4 data = row == me.unit ? early[k] : input_pack(row, k);
        const int line = row * row_lines + 2 * me.pack_of(k);
#pragma unroll
        for (int q = 0; q < kRankBound; ++q) {
          if (q < ranks && q != p.rank) {
            uint4* lines = data_of<uint4>(p, q, p.rank, epoch) + line;
            store_line(lines, make_uint2(data.x, data.y), epoch);
            store_line(lines + 1, make_uint2(data.z, data.w), epoch);
          }
        }
      }
    }
  }

  Pack<T> w[kPacks];
  load_short_row_weight(me, weight, w);
  for (int row = me.unit; row < rows; row += me.units) {
    const std::int64_t start = row_start(row);
    float squares = 0.0f;
    Pack<T> r[kPacks];
    if (me.has(0)) {
      Pack<T> old[kPacks];
      uint4 own[kPacks];
      // A first look at every peer's lines of a pack, all loads in flight at
      // once: of both packs at two ranks; over more ranks of one pack at a
      // time, as the general kernel (both at once took 249 registers a
      // thread).
      constexpr int kAhead = kRanks == 2 ? kPacks : 1;
      uint4 seen[kAhead][kRankBound][2];
      auto line_of = [&](int k) { return row * row_lines + 2 * me.pack_of(k); };
      auto first_look = [&](int k) {
#pragma unroll
        for (int q = 0; q < kRankBound; ++q) {
          if (q < ranks && q != p.rank) {
            const uint4* lines = data_of<uint4>(p, p.rank, q, epoch) + line_of(k);
            seen[k % kAhead][q][0] = load_volatile_pack(lines);
            seen[k % kAhead][q][1] = load_volatile_pack(lines + 1);
          }
        }
      };
#pragma unroll
      for (int k = 0; k < kPacks; ++k) {
        if (k > 0 && !me.has(k)) break;
        old[k].raw = *reinterpret_cast<const uint4*>(residual + start + me.pack_of(k) * V);
        own[k] = row == me.unit ? early[k] : input_pack(row, k);
        if (k < kAhead) first_look(k);
      }
      // The packs in order, each summed in rank order: the general kernel's
      // order of the sum of squares too.
#pragma unroll
      for (int k = 0; k < kPacks; ++k) {
        if (k > 0 && !me.has(k)) break;
        if (k >= kAhead) first_look(k);
        uint4(&looked)[kRankBound][2] = seen[k % kAhead];
        RankOrderSum<T> sum;
#pragma unroll
        for (int q = 0; q < kRankBound; ++q) {
          if (q >= ranks) break;
          Pack<T> data;
          if (q == p.rank) {
            data.raw = own[k];
          } else {
            const uint4* lines = data_of<uint4>(p, p.rank, q, epoch) + line_of(k);
            uint2 low = make_uint2(0u, 0u), high = make_uint2(0u, 0u);
            if (!failed) failed = !take_line(p, lines, looked[q][0], q, epoch, low);
            if (!failed) failed = !take_line(p, lines + 1, looked[q][1], q, epoch, high);
            data.raw = make_uint4(low.x, low.y, high.x, high.y);
          }
          sum.add(data);
        }
        float s[V];
        round_to_element<T>(sum.acc, s);
        residual_pack<T>(s, old[k], r[k], V, squares);
        if (!failed) {
          *reinterpret_cast<uint4*>(residual + start + me.pack_of(k) * V) = r[k].raw;
        }
      }
    }
    const float total = row_sum.row_total(squares, failed);
    if (failed) return;  // every thread of the cluster alike
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      if (me.has(k)) {
        *reinterpret_cast<uint4*>(inout + start + me.pack_of(k) * V) =
            normalized_pack<T>(r[k], w[k], inv_rms_of(total, hidden, eps)).raw;
      }
    }
  }
}

}  // namespace

namespace detail {

const void* fused_ll_short_kernel_for(ElementType type, bool two_ranks, int packs_per_thread) {
  return short_kernel_for(type, two_ranks, packs_per_thread, [](auto tag, auto ranks, auto packs) {
    return fused_ll_short_kernel<decltype(tag), decltype(ranks)::value, decltype(packs)::value>;
  });
}

}  // namespace detail

}  // namespace peerplan::cuda_kernels
