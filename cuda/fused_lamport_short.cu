// SPDX-License-Identifier: Apache-2.0
// The Lamport fused op (fused_lamport.cu) for short rows: a row per cluster
// in which every thread holds at most one pack of the row, on dense,
// 16-byte aligned tensors. The same region, the same pack per thread, the
// same all-or-nothing row and the same arithmetic as fused_lamport_kernel,
// so the two give the same bits and ranks may run either (each rank's own
// choice: its pointers' alignment). As fused_ll_short.cu does for the LL
// kernel, it drops the loops, the rows' second pass and the element
// fallbacks that such a row never takes: at a few rows every instruction
// is on the path.
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
template <class T, int kRanks>
__global__ void __launch_bounds__(kSplitThreads)
    fused_lamport_short_kernel(const __grid_constant__ PeerSet p, T* inout, T* residual,
                               const T* weight, float eps, const __grid_constant__ KernelLayout,
                               std::int64_t rows, std::int64_t hidden) {
  __shared__ RowShared shared;
  constexpr int V = Pack<T>::kCount;
  constexpr int kRankBound = RankLoop<kRanks>::kBound;
  const int ranks = RankLoop<kRanks>::count(p.size);
  RowInCluster row_sum(shared.slots, shared.barriers);
  // This thread's pack of every row (prepare_fused keeps every pack index
  // of the region below 2^31).
  const ShortRowThread me = short_row_thread(row_sum.split(), hidden, V);
  const int row_count = static_cast<int>(rows);
  auto row_start = [&](int row) { return static_cast<std::int64_t>(row) * hidden; };
  // The own pack as the peers sum it (lamport.cuh: no sentinel).
  auto input_pack = [&](int row) {
    return without_sentinel<T>(
        *reinterpret_cast<const uint4*>(inout + row_start(row) + me.pack * V));
  };

  // The first row's pack is loaded while begin_call reads the epoch.
  wait_for_previous_kernel();
  uint4 early = make_uint4(0u, 0u, 0u, 0u);
  if (me.has_pack && me.unit < row_count) early = input_pack(me.unit);
  std::uint32_t epoch;
  // A block of a cluster must not leave alone (see fused_lamport_kernel): a
  // broken transport is carried through the first row's exchange.
  bool failed = !begin_call(p, epoch);

  // The push: this thread's pack of each row into every peer's region, the
  // peers after this rank first (as fused_lamport_kernel spreads the writes).
  if (me.has_pack) {
    for (int row = me.unit; !failed && row < row_count; row += me.units) {
      const uint4 data = row == me.unit ? early : input_pack(row);
      for (int k = 1; k < ranks; ++k) {
        const int q = p.rank + k < ranks ? p.rank + k : p.rank + k - ranks;
        store_volatile_pack(lamport_of(p, q, p.rank, epoch) + (row * me.packs + me.pack), data);
      }
    }
  }

  Pack<T> w;
  if (me.has_pack) w.raw = *reinterpret_cast<const uint4*>(weight + me.pack * V);
  for (int row = me.unit; row < row_count; row += me.units) {
    const std::int64_t start = row_start(row);
    const int at = row * me.packs + me.pack;
    float squares = 0.0f;
    Pack<T> r;
    if (me.has_pack) {
      Pack<T> old;
      old.raw = *reinterpret_cast<const uint4*>(residual + start + me.pack * V);
      const uint4 own = row == me.unit ? early : input_pack(row);
      uint4 seen[kRankBound];
      look_at_arrivals<kRankBound>(p, ranks, epoch, at, seen);
      RankOrderSum<T> sum;
#pragma unroll
      for (int q = 0; q < kRankBound; ++q) {
        if (q >= ranks) break;
        Pack<T> in;
        if (q == p.rank) {
          in.raw = own;
        } else {
          if (!failed)
            failed = !take_pack<T>(p, lamport_of(p, p.rank, q, epoch) + at, q, epoch, seen[q]);
          in.raw = seen[q];
        }
        sum.add(in);
      }
      float s[V];
      round_to_element<T>(sum.acc, s);
      residual_pack<T>(s, old, r, V, squares);
    }
    // All or nothing (add_rms_norm_part_whole): nothing of the row is
    // written unless every thread of the cluster got every pack.
    const float total = row_sum.row_total(squares, failed);
    if (failed) return;  // every thread of the cluster alike
    if (me.has_pack) {
      *reinterpret_cast<uint4*>(residual + start + me.pack * V) = r.raw;
      *reinterpret_cast<uint4*>(inout + start + me.pack * V) =
          normalized_pack<T>(r, w, inv_rms_of(total, hidden, eps)).raw;
      // Ready for call epoch + 2 (lamport.cuh): after this thread's last
      // reads of these packs (program order, same addresses).
      reset_arrivals<kRankBound>(p, ranks, epoch, at);
    }
  }
}

}  // namespace

namespace detail {

const void* fused_lamport_short_kernel_for(ElementType type, bool two_ranks) {
  return kernel_for_ranks(type, two_ranks, [](auto tag, auto ranks) {
    return fused_lamport_short_kernel<decltype(tag), decltype(ranks)::value>;
  });
}

}  // namespace detail

}  // namespace peerplan::cuda_kernels
