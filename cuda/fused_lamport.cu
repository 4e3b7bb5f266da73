// SPDX-License-Identifier: Apache-2.0
// The fused all-reduce + residual add + RMSNorm on the Lamport protocol
// (lamport.cuh: the receive region, the sentinel, arrival, why two parities
// suffice): every rank pushes its rows as plain 16-byte packs into every
// peer's sentinel-filled region, polls its own region for the peers' packs,
// sums them in fp32 in rank order 0..n-1 with its own input at its place,
// and runs the residual add + RMSNorm on the reduced row in the same
// kernel - one write per element across the link (the LL kernel sends
// twice that), no flags and no barrier between the ranks.
//
// Row mapping: the LL fused kernel's (fused_ll.cu). A row is cut
// into kRowSplits splits of kSplitThreads threads (rms_norm_row.cuh); a
// cluster of kRowSplits blocks (one split each, sm_90+) or one block of
// kRowThreads runs one row at a time, and the grid's clusters (blocks)
// take rows unit, unit + units, ...: a cluster per row while rows are few,
// several rows per cluster when they are many, as many clusters (blocks)
// in flight as the device holds at once (resident_units), at most
// kMaxFusedClusters (kMaxFusedBlocks). Thread t of split k pushes
// exactly the packs it later sums (packs first_k + t + i * kSplitThreads
// of each of its rows), so each pack of the region is written by one
// thread of each peer and read and reset by one thread of its owner.
// Dense rows of at most two packs per thread of the cluster, on aligned
// tensors, run the leaner kernel of fused_lamport_short.cu instead: the
// same region, the same threads per pack and the same bits.
//
// Rounding: the row function is add_rms_norm_part_whole, which rounds
// exactly like add_rms_norm_part (the LL, staged and fallback kernels):
// s = round_T(sum over ranks 0..n-1 of the fp32 values), r = round_T(s +
// residual), the sum of squares in the rows' fixed order, out = round_T(r *
// inv_rms * weight). So P2P Lamport bits == LL bits == fallback bits (at
// two ranks NCCL's sum is the same single fp32 add).
//
// Memory ordering, beyond lamport.cuh:
//  - In place: pack j of row r of `inout` is read (push, then the sums)
//    and written (the output) by one thread only, and written only after
//    the row's barrier, which every thread of the row reaches after its
//    whole push phase; no other thread touches that pack.
//  - `residual` (never overlapping `inout`: validated) is read and written
//    per pack by the same thread, written only after the row's barrier.
//  - A region pack is reset to the sentinel by the thread that read it,
//    after its last read (program order, same address), before the kernel
//    completes (step 1 of the chain in lamport.cuh).
//
// Failure: every wait is bounded (take_pack_by_call). The reduction of a row
// completes before anything of the row is written: the row function
// writes the row's residual and output only when every thread of the row
// (block or cluster, decided at the row's barrier) got every pack. So a
// failed call leaves each row either fully updated or untouched (residual
// and output as they were): rows whose packs had all arrived and that a
// cluster finished before it saw the failure (earlier rows of the failing
// cluster, rows of other clusters) stay written; the failing row and the
// rest are not written. A peer that never made the call leaves every row
// untouched.
// The epoch stays, the region is left in any state, and the transport is
// broken until reserve() re-creates the slabs (lamport.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "element_ops.cuh"
#include "lamport.cuh"
#include "launch_recipe.hpp"
#include "launch_shape.cuh"
#include "rank_loop.cuh"
#include "recipe_steps.cuh"
#include "resident_units.hpp"
#include "rms_norm_row.cuh"
#include "short_row.cuh"

namespace peerplan::cuda_kernels {
namespace {

// Rows of the Lamport fused kernel in flight at once, at most: clusters of
// kRowSplits blocks of kSplitThreads threads (as many as the LL kernel),
// or blocks of kRowThreads threads; fewer when the device holds fewer at
// once (resident_units).
constexpr std::int64_t kMaxFusedClusters = 128;
constexpr std::int64_t kMaxFusedBlocks = 128;
static_assert(kMaxFusedClusters * kRowSplits <= kMaxCallBlocks);

// Rows whose packs a thread loads at once in the push phase: their loads
// are in flight together before the stores (a store's "memory" clobber
// keeps the compiler from hoisting later loads above it).
constexpr int kPushRows = 4;

// `v` = values[index] for an index known only at run time, without a
// local-memory array: a chain of selects over the unrolled indices.
template <int N>
__device__ __forceinline__ uint4 pick(const uint4 (&values)[N], int index) {
  uint4 v = values[0];
#pragma unroll
  for (int k = 1; k < N; ++k) {
    if (index == k) v = values[k];
  }
  return v;
}

// kCluster: a row per cluster of kRowSplits blocks (sm_90+), else a row
// per block of kRowThreads. kRanks: 2 for exactly two ranks, 0 for any
// size (rank_loop.cuh). kPeers: how many peers' packs a thread
// loads at once before it sums (1 at two ranks or in a 1024-thread block;
// kMaxRanks - 1 otherwise; the remaining peers' packs are loaded one at a
// time). Registers: the two-rank cluster variant takes 118-123 without a
// bound (ptxas, sm_90); it is bounded to 5 blocks of 128 threads per SM
// (96 registers, up to 112 bytes spilled): 660 blocks, 82 clusters resident
// on 132 SMs. At 4 blocks per SM, without spills, it ran slower from 64
// rows on the kernel loop. The general one fits 4 per SM.
template <class T, bool kCluster, int kRanks>
__global__ void __launch_bounds__(kCluster ? kSplitThreads : kRowThreads,
                                  kCluster ? (kRanks == 2 ? 5 : 4) : 1)
    fused_lamport_kernel(const __grid_constant__ PeerSet p, T* inout, T* residual, const T* weight,
                         float eps, const __grid_constant__ KernelLayout layout, std::int64_t rows,
                         std::int64_t hidden) {
  constexpr int kPeers = kCluster && kRanks == 0 ? kMaxRanks - 1 : 1;
  constexpr int kRankBound = RankLoop<kRanks>::kBound;
  const int ranks = RankLoop<kRanks>::count(p.size);
  __shared__ RowShared shared;
  // This call's region sub-slots: where this rank's packs go in each peer's
  // region (in push order: the peers after this rank first, spreading the
  // writes of many ranks over the links), and where each source's packs
  // arrive in this rank's own region (by source rank; own: unused).
  __shared__ uint4* targets[kMaxRanks];
  __shared__ uint4* arrivals[kMaxRanks];
  constexpr int V = Pack<T>::kCount;
  // Packs kept in registers between the row's two passes (rms_norm_row.cuh):
  // one in the 1024-thread block (64 registers a thread), two in a cluster.
  constexpr int kKept = kCluster ? 2 : 1;
  std::uint32_t epoch;
  const bool started = begin_call(p, epoch);
  // A block of a cluster must not leave alone: its siblings would wait for
  // it at the row's exchange of sums. So a broken transport is carried as a
  // failure through the first row's exchange, and the cluster leaves after
  // it, having pushed nothing.
  if (!kCluster && !started) return;
  bool failed = !started;
  if (static_cast<int>(threadIdx.x) < p.size) {
    const int k = static_cast<int>(threadIdx.x);
    if (k + 1 < p.size) {
      const int q = p.rank + 1 + k < p.size ? p.rank + 1 + k : p.rank + 1 + k - p.size;
      targets[k] = lamport_of(p, q, p.rank, epoch);
    }
    arrivals[k] = k == p.rank ? nullptr : lamport_of(p, p.rank, k, epoch);
  }
  __syncthreads();

  auto row_sum = RowWorkers<kCluster>::row(shared);
  const int units = RowWorkers<kCluster>::row_step();
  const int unit = RowWorkers<kCluster>::first_row();
  // prepare_fused: whole packs, and every pack
  // index of the region (rows * row_packs) below 2^31.
  const int row_packs = static_cast<int>(hidden / V);
  const int row_count = static_cast<int>(rows);
  const RowPart part = row_part(row_sum.split(), row_sum.thread(), row_packs);
  const int my_first = static_cast<int>(part.first_pack) + part.thread;
  const int my_end = static_cast<int>(part.end_pack);

  // Push: this thread's packs of each of its rows, kPushRows rows' loads at
  // a time. The own packs travel as the peers will sum them (no sentinel).
  for (int base = unit; !failed && base < row_count; base += kPushRows * units) {
    for (int j = my_first; j < my_end; j += kSplitThreads) {
      uint4 data[kPushRows];
#pragma unroll
      for (int b = 0; b < kPushRows; ++b) {
        const int row = base + b * units;
        if (row < row_count) {
          const T* src = inout + row_offset(layout, row, hidden);
          data[b] = without_sentinel<T>(
              load_row_pack(src, static_cast<std::int64_t>(j) * V, hidden, aligned16(src)).raw);
        }
      }
#pragma unroll
      for (int b = 0; b < kPushRows; ++b) {
        const int row = base + b * units;
        if (row >= row_count) break;
        for (int k = 0; k + 1 < ranks; ++k) {
          store_volatile_pack(targets[k] + (row * row_packs + j), data[b]);
        }
      }
    }
  }

  // Take in, row by row. After a failure a thread stops waiting; every
  // thread still reaches the row's barrier, writes nothing of the row, and
  // the kernel exits after it (every thread of the block or cluster alike).
  for (int row = unit; row < row_count; row += units) {
    const std::int64_t offset = row_offset(layout, row, hidden);
    const T* src = inout + offset;
    const bool vec = aligned16(src);
    const int row_base = row * row_packs;
    auto sum_pack = [&](std::int64_t first, float(&s)[V], bool again) {
      const int at = row_base + static_cast<int>(first / V);
      // A first look at the peers' packs (peer a is rank a, or a + 1 from
      // this rank on), all loads in flight at once, and the own input as
      // the peers see it. On the second pass (again) every pack has been
      // seen arrived by this thread before, so the first look is the data.
      uint4 seen[kPeers];
#pragma unroll
      for (int a = 0; a < kPeers; ++a) {
        const int r = a < p.rank ? a : a + 1;
        if (r < ranks) seen[a] = load_volatile_pack(arrivals[r] + at);
      }
      const uint4 own = without_sentinel<T>(load_row_pack(src, first, hidden, vec).raw);
      float acc[V];
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = 0.0f;
#pragma unroll
      for (int r = 0; r < kRankBound; ++r) {
        if (r >= ranks) break;
        Pack<T> in;
        if (r == p.rank) {
          in.raw = own;
        } else {
          const int a = r < p.rank ? r : r - 1;
          const uint4* pack = arrivals[r] + at;
          uint4 v = a < kPeers ? pick(seen, a) : load_volatile_pack(pack);
          if (!again && !failed) failed = !take_pack_by_call<T>(p, pack, r, epoch, v);
          in.raw = v;
        }
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] = __fadd_rn(acc[k], to_float(in.v[k]));
      }
      round_to_element<T>(acc, s);
      return !failed;
    };
    if (!add_rms_norm_part_whole<T, kKept>(sum_pack, residual + offset, weight, inout + offset,
                                           hidden, eps, row_sum)) {
      return;  // the same decision on every thread of the block (or cluster)
    }
    // Ready for call epoch + 2 (lamport.cuh): after this thread's last
    // reads of these packs (program order, same addresses).
    for (int j = my_first; j < my_end; j += kSplitThreads) {
#pragma unroll
      for (int r = 0; r < kRankBound; ++r) {
        if (r >= ranks) break;
        if (r != p.rank) store_volatile_pack(arrivals[r] + row_base + j, sentinel_pack());
      }
    }
  }
}

template <class T, bool kCluster, int kRanks>
constexpr auto kernel_of = fused_lamport_kernel<T, kCluster, kRanks>;

// Clusters (kCluster) or blocks of the kernel that the current device holds
// at once, from the occupancy calculator, computed once per device and
// variant (at declare, in prepare_fused(); never on a call's path nor in a
// graph capture); the grid is
// never larger: a cluster that is not resident would start only when
// another has finished its rows, long after its own rows' data arrived.
// kMaxFusedClusters (kMaxFusedBlocks) when the calculator fails.
// kShortPacks: for fused_lamport_short.cu's kernel of as many packs a thread
// (cluster only), `kernel`; 0 for this file's.
template <class T, bool kCluster, int kRanks, int kShortPacks = 0>
std::int64_t resident_units(const void* kernel) {
  static detail::ResidentCache cache;
  return detail::resident_row_units(kernel, kCluster,
                                    kCluster ? kMaxFusedClusters : kMaxFusedBlocks, cache);
}

// Which instantiation serves a call: a cluster per row where the device has
// clusters (peers.cluster_rows), else a 1024-thread block per row; each
// with the two-rank variant at two ranks.
template <class T, class F>
void with_variant(const PeerSet& peers, F&& run) {
  auto with_ranks = [&](auto cluster) {
    if (peers.size == 2)
      run(cluster, std::integral_constant<int, 2>{});
    else
      run(cluster, std::integral_constant<int, 0>{});
  };
  if (peers.cluster_rows)
    with_ranks(std::integral_constant<bool, true>{});
  else
    with_ranks(std::integral_constant<bool, false>{});
}

}  // namespace

namespace detail {

// The grid is this rank's choice (no per-block flags): the peers need only
// agree on the region's layout, which rows and hidden fix. Dense rows of at
// most two packs per thread of a cluster run fused_lamport_short.cu's kernel
// when the call's tensors are aligned (launch() checks), else this file's;
// the grid is one that both hold at once.
KernelStep fused_lamport_step(const PeerSet& shape, ElementType type, const KernelLayout& layout,
                              std::int64_t rows, std::int64_t hidden) {
  KernelStep step;
  with_element_type(type, [&](auto tag) {
    using T = decltype(tag);
    with_variant<T>(shape, [&](auto cluster, auto ranks) {
      constexpr bool kCluster = decltype(cluster)::value;
      constexpr int kRanks = decltype(ranks)::value;
      step.kernel = reinterpret_cast<const void*>(kernel_of<T, kCluster, kRanks>);
      std::int64_t most = resident_units<T, kCluster, kRanks>(step.kernel);
      if constexpr (kCluster) {
        const std::int64_t packs = hidden / Pack<T>::kCount;
        if (layout.dense && packs <= kShortRowMaxPacks) {
          step.unaligned_kernel = step.kernel;
          const int per_thread = short_row_packs_per_thread(packs);
          step.kernel = fused_lamport_short_kernel_for(type, kRanks == 2, per_thread);
          most = std::min(most, per_thread == 1 ? resident_units<T, true, kRanks, 1>(step.kernel)
                                                : resident_units<T, true, kRanks, 2>(step.kernel));
        }
      }
      const auto units = static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, most));
      if constexpr (kCluster) {
        step.blocks = units * kRowSplits;
        step.threads = kSplitThreads;
        step.cluster = kRowSplits;
      } else {
        step.blocks = units;
        step.threads = kRowThreads;
      }
    });
  });
  step.programmatic = shape.overlap_launch;
  return step;
}

}  // namespace detail

}  // namespace peerplan::cuda_kernels
