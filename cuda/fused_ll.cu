// SPDX-License-Identifier: Apache-2.0
// The fused all-reduce + residual add + RMSNorm on LL lines (ll_lines.cuh):
// rows of whole 16-byte packs, a row per cluster of kRowSplits blocks
// (sm_90+, PeerSet::cluster_rows) or per block of kRowThreads, the row
// function of rms_norm_row.cuh. Twins: fused_lamport.cu (same row mapping
// on the Lamport region), fused_staged.cu. An instantiation for exactly two
// ranks runs beside the general one (fused_ll_step). Dense rows of at most
// two packs per thread of the cluster, on aligned tensors, run the leaner
// kernel of fused_ll_short.cu instead: the same lines and the same bits.
// Sums are fp32 in fixed rank order 0..n-1 with one rounding, so every
// rank's output is bit-identical. Peer slots are read 16 bytes at a time;
// the caller's tensors use 16-byte accesses only where this rank's pointer
// is aligned (a local choice: it never changes what is exchanged), element
// by element otherwise.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "element_ops.cuh"
#include "launch_recipe.hpp"
#include "launch_shape.cuh"
#include "ll_lines.cuh"
#include "rank_loop.cuh"
#include "recipe_steps.cuh"
#include "rms_norm_row.cuh"
#include "short_row.cuh"

namespace peerplan::cuda_kernels {
namespace {

// Rows of the LL fused kernel in flight at once (clusters of kRowSplits blocks).
constexpr std::int64_t kMaxFusedClusters = 128;
static_assert(kMaxFusedClusters * kRowSplits <= kMaxCallBlocks);

// The fused op for small messages: rows travel as LL lines, as in the
// one-shot all-reduce, so there is no flag barrier (and no release fence):
// each pack of the row function waits for exactly the lines it sums. Rows
// are whole numbers of 16-byte packs (prepare_fused checks), so pack j of a
// row is its lines 2j and 2j + 1. kCluster: a row per cluster of
// kRowSplits blocks (sm_90+), else a row per block; same bits either way.
// kRanks: 2 for exactly two ranks, 0 for any size (rank_loop.cuh).
template <class T, bool kCluster, int kRanks>
__global__ void __launch_bounds__(kCluster ? kSplitThreads : kRowThreads)
    fused_ll_kernel(const __grid_constant__ PeerSet p, T* inout, T* residual, const T* weight,
                    float eps, const __grid_constant__ KernelLayout layout, std::int64_t rows,
                    std::int64_t hidden) {
  __shared__ RowShared shared;
  constexpr int V = Pack<T>::kCount;
  constexpr int E = 8 / sizeof(T);  // elements per line
  static_assert(V == 2 * E, "a pack is two lines");
  constexpr int kRankBound = RankLoop<kRanks>::kBound;
  const int ranks = RankLoop<kRanks>::count(p.size);
  auto row_sum = RowWorkers<kCluster>::row(shared);
  const int units = RowWorkers<kCluster>::row_step();
  const int unit = RowWorkers<kCluster>::first_row();
  const std::int64_t row_lines = hidden / E;
  const RowPart part = row_part(row_sum.split(), row_sum.thread(), row_lines / 2);
  // Line l of a row's input. This rank's own lines are not sent to itself:
  // the sum reads them from the input, which stays as it is until the
  // row's barrier (the output is written after it).
  auto input_line = [&](const T* src, std::int64_t l) {
    Half8<T> data;
    if ((reinterpret_cast<std::uintptr_t>(src) & 7u) == 0) {
      data.raw = *reinterpret_cast<const uint2*>(src + l * E);
    } else {
      for (int k = 0; k < E; ++k) data.v[k] = src[l * E + k];
    }
    return data.raw;
  };

  // The first two lines this thread pushes are loaded while begin_call
  // reads the epoch, so that their latency overlaps its atomic instead of
  // following it (a short row is one or two lines a thread).
  wait_for_previous_kernel();
  const std::int64_t first_line = 2 * part.first_pack + part.thread;
  const T* first_src = inout + row_offset(layout, unit, hidden);
  const bool has_early[2] = {unit < rows && first_line < 2 * part.end_pack,
                             unit < rows && first_line + kSplitThreads < 2 * part.end_pack};
  uint2 early[2] = {};
  if (has_early[0]) early[0] = input_line(first_src, first_line);
  if (has_early[1]) early[1] = input_line(first_src, first_line + kSplitThreads);

  std::uint32_t epoch;
  const bool started = begin_call(p, epoch);
  // A block of a cluster must not leave alone: its siblings would wait for
  // it at the row's exchange of sums. So a broken transport is carried as a
  // failure through the first row's exchange, and the cluster leaves after it.
  if (!kCluster && !started) return;
  bool failed = !started;
  auto first_look = [&](const T* src, std::int64_t row, int r, std::int64_t l) {
    if (r == p.rank) {
      const uint2 own = input_line(src, l);
      return make_line(own, epoch);  // its own line, as if it had arrived
    }
    return load_volatile_pack(data_of<uint4>(p, p.rank, r, epoch) + row * row_lines + l);
  };
  for (std::int64_t row = unit; !failed && row < rows; row += units) {
    const T* src = inout + row_offset(layout, row, hidden);
    for (std::int64_t l = first_line; l < 2 * part.end_pack; l += kSplitThreads) {
      const bool first_row = row == unit;
      const uint2 data = first_row && l == first_line                   ? early[0]
                         : first_row && l == first_line + kSplitThreads ? early[1]
                                                                        : input_line(src, l);
      for (int q = 0; q < ranks; ++q) {
        if (q != p.rank) {
          store_line(data_of<uint4>(p, q, p.rank, epoch) + row * row_lines + l, data, epoch);
        }
      }
    }
  }

  // After a failure a thread stops waiting; every thread still reaches the
  // row's barrier, writes nothing more, and the kernel exits after it.
  for (std::int64_t row = unit; row < rows; row += units) {
    const T* src = inout + row_offset(layout, row, hidden);
    auto sum_pack = [&](std::int64_t first, float(&s)[V]) {
      const std::int64_t in_row = first / E;
      const std::int64_t line = row * row_lines + in_row;
      // A first look at every source's two lines, all loads in flight at
      // once - in the cluster kernel, whose 128-thread blocks have the
      // registers for it; the 1024-thread block (64 registers a thread)
      // looks at one source at a time.
      constexpr int kAhead = kCluster ? kRankBound : 1;
      uint4 seen[kAhead][2];
#pragma unroll
      for (int r = 0; r < kAhead; ++r) {
        if (r < ranks) {
          seen[r][0] = first_look(src, row, r, in_row);
          seen[r][1] = first_look(src, row, r, in_row + 1);
        }
      }
      float acc[V];
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = 0.0f;
#pragma unroll
      for (int r = 0; r < kRankBound; ++r) {
        if (r >= ranks) break;
        const uint4* lines = data_of<uint4>(p, p.rank, r, epoch) + line;
        if (r >= kAhead) {
          seen[0][0] = first_look(src, row, r, in_row);
          seen[0][1] = first_look(src, row, r, in_row + 1);
        }
        const uint4 low_seen = seen[r < kAhead ? r : 0][0];
        const uint4 high_seen = seen[r < kAhead ? r : 0][1];
        Half8<T> low, high;
        low.raw = high.raw = make_uint2(0u, 0u);
        if (!failed) failed = !take_line(p, lines, low_seen, r, epoch, low.raw);
        if (!failed) failed = !take_line(p, lines + 1, high_seen, r, epoch, high.raw);
#pragma unroll
        for (int k = 0; k < E; ++k) {
          acc[k] = __fadd_rn(acc[k], to_float(low.v[k]));
          acc[E + k] = __fadd_rn(acc[E + k], to_float(high.v[k]));
        }
      }
      round_to_element<T>(acc, s);
      return !failed;
    };
    const std::int64_t offset = row_offset(layout, row, hidden);
    if (!add_rms_norm_part<T>(sum_pack, residual + offset, weight, inout + offset, hidden, eps,
                              row_sum)) {
      return;  // the same decision on every thread of the block (or cluster)
    }
  }
}

}  // namespace

namespace detail {

KernelStep fused_ll_step(const PeerSet& shape, ElementType type, const KernelLayout& layout,
                         std::int64_t rows, std::int64_t hidden) {
  KernelStep step;
  with_element_type(type, [&](auto tag) {
    using T = decltype(tag);
    const bool two = shape.size == 2;
    if (shape.cluster_rows) {
      const auto clusters =
          static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, kMaxFusedClusters));
      step.kernel = two ? reinterpret_cast<const void*>(fused_ll_kernel<T, true, 2>)
                        : reinterpret_cast<const void*>(fused_ll_kernel<T, true, 0>);
      step.blocks = clusters * kRowSplits;
      step.threads = kSplitThreads;
      step.cluster = kRowSplits;
      // The short-row kernel indexes packs and lines in 32 bits.
      const std::int64_t packs = hidden / Pack<T>::kCount;
      if (layout.dense && packs <= kShortRowMaxPacks &&
          rows <= std::numeric_limits<std::int32_t>::max() / (2 * packs)) {
        step.unaligned_kernel = step.kernel;
        step.kernel = fused_ll_short_kernel_for(type, two, short_row_packs_per_thread(packs));
      }
    } else {
      step.kernel = two ? reinterpret_cast<const void*>(fused_ll_kernel<T, false, 2>)
                        : reinterpret_cast<const void*>(fused_ll_kernel<T, false, 0>);
      step.blocks = static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, kMaxBlocks));
      step.threads = kRowThreads;
    }
  });
  step.programmatic = shape.overlap_launch;
  return step;
}

}  // namespace detail

bool rows_in_clusters_supported(int device) {
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, fused_ll_kernel<__nv_bfloat16, true, 0>) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  // The device code that will run must be sm_90+ too (a build for older
  // architectures only has no cluster code, even on a Hopper GPU).
  return major >= 9 && attributes.binaryVersion >= 90;
}

}  // namespace peerplan::cuda_kernels
