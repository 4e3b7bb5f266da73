// SPDX-License-Identifier: Apache-2.0
// The push two-shot all-reduce: reduce-scatter and all-gather over staged
// packs (two_shot_phases.cuh), with per-block flag barriers
// (device_sync.cuh); shards from shard_geometry.cuh. Its pull twin is pull_kernels.cu; the fused op's
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
#include "two_shot_phases.cuh"

namespace peerplan::cuda_kernels {
namespace {

// The three phases of two_shot_phases.cuh in one kernel, with the flag
// barriers 'arrive' (every input staged) and 'reduced' (every shard
// reduced and pushed) between them.
template <class T>
__global__ void __launch_bounds__(kThreads)
    two_shot_kernel(const __grid_constant__ PeerSet p, const T* in, T* out,
                    const __grid_constant__ KernelLayout layout, std::int64_t count) {
  std::uint32_t epoch;
  if (!begin_call(p, epoch)) return;
  constexpr int V = Pack<T>::kCount;
  const std::int64_t shard = shard_elements<V>(count, p.size);
  const two_shot::PackWalk walk = two_shot::pack_walk();
  const bool out_vec = layout.dense && aligned16(out);

  if (!two_shot::push_shards_then_wait(p, in, layout, count, shard, epoch, walk)) return;
  for (std::int64_t j = walk.begin; j < shard / V; j += walk.stride) {
    const std::int64_t first = p.rank * shard + j * V;
    if (first >= count) break;
    const Pack<T> sum = two_shot::reduce_sources<T>(p, epoch, first);
    two_shot::push_reduced(p, epoch, first, sum);
    store_tensor(out, layout, out_vec, first, count, sum);
  }
  two_shot::wait_then_gather(p, out, layout, out_vec, count, shard, epoch, walk);
}

}  // namespace

namespace detail {

KernelStep two_shot_step(const PeerSet& shape, ElementType type, std::int64_t shard) {
  return grid_step(
      type, [](auto tag) { return two_shot_kernel<decltype(tag)>; },
      [&](auto tag) { return packs_for<decltype(tag)>(shard); }, kTwoShotMaxBlocks,
      shape.overlap_launch);
}

}  // namespace detail

}  // namespace peerplan::cuda_kernels
