// SPDX-License-Identifier: Apache-2.0
// The fused op's two-shot in one kernel, the residual add and RMSNorm done
// in its all-gather: the reduced rows go from the slot straight into the
// norm, instead of being written to inout by the two-shot and read back by
// row_norm.cu's kernel. For dense rows of at most kKeptPacks packs a
// thread (fused_two_shot_rows_fits); other shapes keep the two kernels.
//
// Shards are whole rows: rank s owns rows [s * R, min((s + 1) * R, rows)),
// R = ceil(rows / ranks), and block b handles the rows R * s + k of every
// shard s for k = b, b + grid, ... So the per-block flags order exactly
// the rows a block needs, and a block reads its rows of inout before it
// writes them (in place). The sums are the two-shot's (fp32 in rank order
// 0..n-1, one rounding), the row function's threads and order are
// rms_norm_row.cuh's (a row per block of kRowThreads): the same bits as
// every other fused path.
#include <algorithm>
#include <cstdint>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "element_ops.cuh"
#include "launch_recipe.hpp"
#include "launch_shape.cuh"
#include "rank_loop.cuh"
#include "recipe_steps.cuh"
#include "rms_norm_row.cuh"
#include "two_shot_phases.cuh"

namespace peerplan::cuda_kernels {
namespace {

// kAligned: inout, residual and weight are 16-byte aligned (the call's
// choice, KernelStep::unaligned_kernel); else their packs go element by
// element. kRanks: 2 for exactly two ranks (rank_loop.cuh), whose loops
// over shards and sources hold a pack per rank instead of kMaxRanks and
// whose row walk divides by a constant.
template <class T, bool kAligned, int kRanks>
__global__ void __launch_bounds__(kRowThreads, 1)
    fused_two_shot_rows_kernel(const __grid_constant__ PeerSet p, T* inout, T* residual,
                               const T* weight, float eps,
                               const __grid_constant__ KernelLayout /*layout: dense*/,
                               std::int64_t rows, std::int64_t hidden) {
  __shared__ RowShared shared;
  constexpr int V = Pack<T>::kCount;
  constexpr int kKept = kKeptPacks;
  constexpr int kRankBound = RankLoop<kRanks>::kBound;
  // Read where used: p.size comes from the parameter space, a register kept
  // for it spills in the general kernel.
  const auto ranks = [&p] { return RankLoop<kRanks>::count(p.size); };
  std::uint32_t epoch;
  if (!begin_call(p, epoch)) return;
  const std::int64_t shard_rows = (rows + ranks() - 1) / ranks();
  RowInBlock row_sum(shared.scratch);
  const KeptPacks mine = kept_packs<V>(row_part(row_sum.split(), row_sum.thread(), hidden / V));
  constexpr bool inout_vec = kAligned, residual_vec = kAligned;
  const std::int64_t first_k = blockIdx.x;
  const std::int64_t step_k = gridDim.x;

  // Phase 1: this block's rows of every shard s into rank s's slot,
  // sub-slot <own rank>; then the 'arrive' barrier. A block writes nothing
  // of inout or residual before its 'reduced' barrier below, so a call that
  // gives up leaves each row either updated (by a block that passed it) or
  // as it was.
  for (std::int64_t k = first_k; k < shard_rows; k += step_k) {
#pragma unroll
    for (int it = 0; it < kKept; ++it) {
      if (!mine.has[it]) continue;
      Pack<T> in[kRankBound];
#pragma unroll
      for (int s = 0; s < kRankBound; ++s) {
        const std::int64_t row = s * shard_rows + k;
        if (s < ranks() && row < rows) {
          in[s] = load_row_pack(inout + row * hidden, mine.element[it], hidden, inout_vec);
        }
      }
#pragma unroll
      for (int s = 0; s < kRankBound; ++s) {
        const std::int64_t row = s * shard_rows + k;
        if (s < ranks() && row < rows) {
          *reinterpret_cast<uint4*>(data_of<T>(p, s, p.rank, epoch) + row * hidden +
                                    mine.element[it]) = in[s].raw;
        }
      }
    }
  }
  __syncthreads();
  signal_peers(p, FlagRow::arrive, epoch);
  if (!wait_peers(p, signals_of(p, p.rank)->arrive[blockIdx.x], epoch, Phase::arrive, epoch)) {
    return;
  }

  // Phase 2: this block's rows of the own shard summed, pushed into every
  // peer's slot (sub-slot <own rank>) and kept in this rank's own sub-slot
  // <own rank>, over its input (read just before, by the same thread).
  for (std::int64_t k = first_k; k < shard_rows; k += step_k) {
    const std::int64_t row = p.rank * shard_rows + k;
    if (row >= rows) break;
#pragma unroll
    for (int it = 0; it < kKept; ++it) {
      if (!mine.has[it]) continue;
      const std::int64_t first = row * hidden + mine.element[it];
      const Pack<T> sum = two_shot::reduce_sources<T, kRanks>(p, epoch, first);
      two_shot::push_reduced<T, kRanks>(p, epoch, first, sum);
      *reinterpret_cast<uint4*>(data_of<T>(p, p.rank, p.rank, epoch) + first) = sum.raw;
    }
  }
  __syncthreads();
  signal_peers(p, FlagRow::reduced, epoch);
  if (!wait_peers(p, signals_of(p, p.rank)->reduced[blockIdx.x], epoch, Phase::reduced, epoch)) {
    return;
  }

  // Phase 3: every row of this block, its sums from sub-slot <owner>, with
  // the next row's sums and old residual loaded before this row's total is
  // exchanged (row_norm.cu's streamed kernel does the same).
  // Row i of this block: k = first_k + (i / size) * step_k in shard i % size.
  auto row_of = [&](std::int64_t i, int& owner) {
    owner = static_cast<int>(i % ranks());
    return owner * shard_rows + first_k + (i / ranks()) * step_k;
  };
  const std::int64_t my_rows = (shard_rows - first_k + step_k - 1) / step_k * ranks();
  Pack<T> sums[kKept], old[kKept];
  auto load_row = [&](std::int64_t i, Pack<T>(&s)[kKept], Pack<T>(&o)[kKept]) {
    int owner = 0;
    const std::int64_t row = row_of(i, owner);
    if (row >= rows) return;
#pragma unroll
    for (int it = 0; it < kKept; ++it) {
      if (!mine.has[it]) continue;
      s[it].raw = *reinterpret_cast<const uint4*>(data_of<T>(p, p.rank, owner, epoch) +
                                                  row * hidden + mine.element[it]);
      o[it] = load_row_pack(static_cast<const T*>(residual) + row * hidden, mine.element[it],
                            hidden, residual_vec);
    }
  };
  if (my_rows > 0) load_row(0, sums, old);
  for (std::int64_t i = 0; i < my_rows; ++i) {
    int owner = 0;
    const std::int64_t row = row_of(i, owner);
    // Past the last row (a short last shard): the same for every thread of
    // the block, so the block's barriers still match; the next row's loads
    // are still due.
    if (row >= rows) {
      if (i + 1 < my_rows) load_row(i + 1, sums, old);
      continue;
    }
    Pack<T> next_sums[kKept], next_old[kKept];
    if (i + 1 < my_rows) load_row(i + 1, next_sums, next_old);
    float squares = 0.0f;
    Pack<T> r[kKept];
    kept_residuals<T>(mine, sums, old, r, squares, [&](int it, const Pack<T>& made) {
      store_row_pack(residual + row * hidden, mine.element[it], hidden, residual_vec, made);
    });
    bool failed = false;
    const float inv_rms = inv_rms_of(row_sum.row_total(squares, failed), hidden, eps);
#pragma unroll
    for (int it = 0; it < kKept; ++it) {
      if (!mine.has[it]) continue;
      // The weight again for each row (a cache hit): kept in registers
      // across rows, it spilled.
      const Pack<T> w = load_row_pack(weight, mine.element[it], hidden, kAligned);
      store_row_pack(inout + row * hidden, mine.element[it], hidden, inout_vec,
                     normalized_pack<T>(r[it], w, inv_rms));
      sums[it] = next_sums[it];
      old[it] = next_old[it];
    }
  }
}

}  // namespace

namespace detail {

KernelStep fused_two_shot_rows_step(const PeerSet& shape, ElementType type, std::int64_t rows) {
  KernelStep step;
  with_element_type(type, [&](auto tag) {
    using T = decltype(tag);
    if (shape.size == 2) {
      step.kernel = reinterpret_cast<const void*>(fused_two_shot_rows_kernel<T, true, 2>);
      step.unaligned_kernel =
          reinterpret_cast<const void*>(fused_two_shot_rows_kernel<T, false, 2>);
    } else {
      step.kernel = reinterpret_cast<const void*>(fused_two_shot_rows_kernel<T, true, 0>);
      step.unaligned_kernel =
          reinterpret_cast<const void*>(fused_two_shot_rows_kernel<T, false, 0>);
    }
  });
  // A block per row of a shard, at most one per per-block flag: the grid
  // depends on the message alone, the same on every rank.
  const std::int64_t shard_rows = (rows + shape.size - 1) / shape.size;
  step.blocks = static_cast<unsigned>(std::clamp<std::int64_t>(shard_rows, 1, kTwoShotMaxBlocks));
  step.threads = kRowThreads;
  step.programmatic = shape.overlap_launch;
  return step;
}

}  // namespace detail

bool fused_two_shot_rows_fits(ElementType type, std::int64_t hidden) noexcept {
  const std::int64_t pack = static_cast<std::int64_t>(kPackBytes / detail::element_bytes(type));
  return hidden > 0 && hidden % pack == 0 &&
         (hidden / pack + kRowSplits - 1) / kRowSplits <= std::int64_t{kKeptPacks} * kSplitThreads;
}

}  // namespace peerplan::cuda_kernels
