// The push two-shot all-reduce: reduce-scatter and all-gather over staged
// packs, with per-block flag barriers (device_sync.cuh); shards from
// shard_geometry.cuh. Its pull twin is pull_kernels.cu; the fused op's
// two-shot + row norm path runs this kernel in place before row_norm.cu's.
// Sums are fp32 in fixed rank order 0..n-1 with one rounding, so every
// rank's output is bit-identical. Peer slots are read 16 bytes at a time;
// the caller's tensors use 16-byte accesses only where this rank's pointer
// is aligned (a local choice: it never changes what is exchanged), element
// by element otherwise.
#include <cstdint>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "element_ops.cuh"
#include "launch_recipe.hpp"
#include "launch_shape.cuh"
#include "recipe_steps.cuh"
#include "shard_geometry.cuh"

namespace peerplan::cuda_kernels {
namespace {

// Sum of every source's sub-slot of this rank's own slot at element
// `first` (a pack boundary): fixed rank order, one rounding, local reads,
// all issued before the first add.
template <class T>
__device__ __forceinline__ Pack<T> reduce_sources(const PeerSet& p, std::uint32_t epoch,
                                                  std::int64_t first) {
  Pack<T> in[kMaxRanks];
#pragma unroll
  for (int r = 0; r < kMaxRanks; ++r) {
    if (r < p.size) in[r].raw = *reinterpret_cast<const uint4*>(data_of<T>(p, p.rank, r, epoch) + first);
  }
  float acc[Pack<T>::kCount];
#pragma unroll
  for (int k = 0; k < Pack<T>::kCount; ++k) acc[k] = 0.0f;
#pragma unroll
  for (int r = 0; r < kMaxRanks; ++r) {
    if (r >= p.size) break;
#pragma unroll
    for (int k = 0; k < Pack<T>::kCount; ++k) acc[k] = __fadd_rn(acc[k], to_float(in[r].v[k]));
  }
  Pack<T> out;
#pragma unroll
  for (int k = 0; k < Pack<T>::kCount; ++k) out.v[k] = from_float<T>(acc[k]);
  return out;
}

// Shard s covers [s * shard, min((s + 1) * shard, count)), shard a whole
// number of packs. Reduce-scatter: every rank pushes shard s of its input
// into rank s's slot (sub-slot <own rank>); rank s reduces its shard from
// its own slot and pushes the result into every peer's slot (sub-slot s, at
// the shard's positions, unused by the first phase); all-gather reads are
// local. Block b handles pack j of every shard for the same j on every
// rank, so per-block flags order exactly the data each block needs.
template <class T>
__global__ void __launch_bounds__(kThreads)
    two_shot_kernel(const __grid_constant__ PeerSet p, const T* in, T* out, const __grid_constant__ KernelLayout layout, std::int64_t count) {
  std::uint32_t epoch, ticket;
  if (!begin_call(p, epoch, ticket)) return;
  Signals* own = signals_of(p, p.rank);

  constexpr int V = Pack<T>::kCount;
  const std::int64_t shard = shard_elements<V>(count, p.size);
  const std::int64_t shard_packs = shard / V;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool in_vec = layout.dense && aligned16(in);
  const bool out_vec = layout.dense && aligned16(out);

  // Loads of a step first, then its stores: the compiler may not move a
  // load past a store that could alias it, so this is spelled out.
  for (std::int64_t j = begin; j < shard_packs; j += stride) {
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
  __syncthreads();
  signal_peers(p, FlagRow::arrive, epoch);
  if (!wait_peers(p, own->arrive[blockIdx.x], epoch, Phase::arrive, epoch)) return;

  for (std::int64_t j = begin; j < shard_packs; j += stride) {
    const std::int64_t first = p.rank * shard + j * V;
    if (first >= count) break;
    const Pack<T> sum = reduce_sources<T>(p, epoch, first);
    for (int q = 0; q < p.size; ++q) {
      if (q != p.rank) *reinterpret_cast<uint4*>(data_of<T>(p, q, p.rank, epoch) + first) = sum.raw;
    }
    store_tensor(out, layout, out_vec, first, count, sum);
  }
  __syncthreads();
  signal_peers(p, FlagRow::reduced, epoch);
  if (!wait_peers(p, own->reduced[blockIdx.x], epoch, Phase::reduced, epoch)) return;

  for (std::int64_t j = begin; j < shard_packs; j += stride) {
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
      if (s < p.size && s != p.rank && first < count) store_tensor(out, layout, out_vec, first, count, sums[s]);
    }
  }
  finish_call(p, epoch, ticket);
}

}  // namespace

namespace detail {

KernelStep two_shot_step(const PeerSet& shape, ElementType type, std::int64_t shard) {
  KernelStep step;
  with_element_type(type, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = Pack<T>::kCount;
    step.kernel = reinterpret_cast<const void*>(two_shot_kernel<T>);
    step.blocks = blocks_for(shard / V, kTwoShotMaxBlocks);
  });
  step.threads = kThreads;
  step.programmatic = shape.overlap_launch;
  return step;
}

}  // namespace detail

}  // namespace peerplan::cuda_kernels
