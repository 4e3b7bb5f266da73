// SPDX-License-Identifier: Apache-2.0
// The LL fused op (fused_ll.cu) for short rows: a row per cluster in which
// every thread holds at most one pack of the row, on dense, 16-byte aligned
// tensors. The same lines in the same slots, the same pack per thread and
// the same arithmetic as fused_ll_kernel, so the two give the same bits and
// ranks may run either (the choice is each rank's own: its pointers'
// alignment). What it saves is instructions: at a few rows each block of
// the cluster has one warp per scheduler, so every instruction's latency
// is on the path, and the general kernel spends most of its instructions
// on loops, 64-bit indices and fallbacks that such a row never takes.
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
// dense here (fused_ll_step checks), so it goes unused.
template <class T, int kRanks>
__global__ void __launch_bounds__(kSplitThreads)
    fused_ll_short_kernel(const __grid_constant__ PeerSet p, T* inout, T* residual, const T* weight,
                          float eps, const __grid_constant__ KernelLayout, std::int64_t rows,
                          std::int64_t hidden) {
  __shared__ RowShared shared;
  constexpr int V = Pack<T>::kCount;
  constexpr int kRankBound = RankLoop<kRanks>::kBound;
  const int ranks = RankLoop<kRanks>::count(p.size);
  RowInCluster row_sum(shared.slots, shared.barriers);
  // This thread's pack of every row (fused_ll_step keeps every line index
  // below 2^31).
  const ShortRowThread me = short_row_thread(row_sum.split(), hidden, V);
  const int row_lines = 2 * me.packs;
  auto row_start = [&](int row) { return static_cast<std::int64_t>(row) * hidden; };
  auto input_pack = [&](int row) {
    return *reinterpret_cast<const uint4*>(inout + row_start(row) + me.pack * V);
  };

  // The first row's pack is loaded while begin_call reads the epoch.
  wait_for_previous_kernel();
  uint4 early = make_uint4(0u, 0u, 0u, 0u);
  if (me.has_pack && me.unit < rows) early = input_pack(me.unit);
  std::uint32_t epoch;
  // A block of a cluster must not leave alone (see fused_ll_kernel): a
  // broken transport is carried through the first row's exchange.
  bool failed = !begin_call(p, epoch);

  // The push: this thread's pack of each row as its two lines, to every peer.
  if (me.has_pack) {
    for (int row = me.unit; !failed && row < rows; row += me.units) {
      const uint4 data = row == me.unit ? early : input_pack(row);
      const int line = row * row_lines + 2 * me.pack;
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

  Pack<T> w;
  if (me.has_pack) w.raw = *reinterpret_cast<const uint4*>(weight + me.pack * V);
  for (int row = me.unit; row < rows; row += me.units) {
    const std::int64_t start = row_start(row);
    float squares = 0.0f;
    Pack<T> r;
    if (me.has_pack) {
      Pack<T> old;
      old.raw = *reinterpret_cast<const uint4*>(residual + start + me.pack * V);
      const uint4 own = row == me.unit ? early : input_pack(row);
      // A first look at every peer's two lines, all loads in flight at once.
      const int line = row * row_lines + 2 * me.pack;
      uint4 seen[kRankBound][2];
#pragma unroll
      for (int q = 0; q < kRankBound; ++q) {
        if (q < ranks && q != p.rank) {
          const uint4* lines = data_of<uint4>(p, p.rank, q, epoch) + line;
          seen[q][0] = load_volatile_pack(lines);
          seen[q][1] = load_volatile_pack(lines + 1);
        }
      }
      RankOrderSum<T> sum;
#pragma unroll
      for (int q = 0; q < kRankBound; ++q) {
        if (q >= ranks) break;
        Pack<T> data;
        if (q == p.rank) {
          data.raw = own;
        } else {
          const uint4* lines = data_of<uint4>(p, p.rank, q, epoch) + line;
          uint2 low = make_uint2(0u, 0u), high = make_uint2(0u, 0u);
          if (!failed) failed = !take_line(p, lines, seen[q][0], q, epoch, low);
          if (!failed) failed = !take_line(p, lines + 1, seen[q][1], q, epoch, high);
          data.raw = make_uint4(low.x, low.y, high.x, high.y);
        }
        sum.add(data);
      }
      float s[V];
      round_to_element<T>(sum.acc, s);
      residual_pack<T>(s, old, r, V, squares);
      if (!failed) *reinterpret_cast<uint4*>(residual + start + me.pack * V) = r.raw;
    }
    const float total = row_sum.row_total(squares, failed);
    if (failed) return;  // every thread of the cluster alike
    if (me.has_pack) {
      *reinterpret_cast<uint4*>(inout + start + me.pack * V) =
          normalized_pack<T>(r, w, inv_rms_of(total, hidden, eps)).raw;
    }
  }
}

}  // namespace

namespace detail {

const void* fused_ll_short_kernel_for(ElementType type, bool two_ranks) {
  return kernel_for_ranks(type, two_ranks, [](auto tag, auto ranks) {
    return fused_ll_short_kernel<decltype(tag), decltype(ranks)::value>;
  });
}

}  // namespace detail

}  // namespace peerplan::cuda_kernels
