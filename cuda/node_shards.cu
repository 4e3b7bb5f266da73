// SPDX-License-Identifier: Apache-2.0
// The hierarchical route's kernels (several nodes, the same number of
// ranks on each): the push two-shot (two_shot_phases.cuh) cut in two
// around the step between nodes, which the transport runs in between
// (NCCL or MPI among the ranks that hold the same local rank, one per
// node: src/transport/cuda/node_exchange.hpp).
//
//   node_reduce_scatter: stage, barrier 'arrive', reduce this rank's shard
//     of the node's sum (fp32 in local rank order, one rounding) into
//     `node_shard`, a contiguous buffer of this rank's own (element 0 =
//     the shard's first element).
//   (between nodes: `node_shard` becomes the sum over the nodes)
//   node_all_gather: push `node_shard` into every peer's slot and into
//     `out`, barrier 'reduced', gather the other shards into `out`.
//
// An element after the shard in `node_shard` is the mark (shard_geometry.cuh),
// summed between nodes with the shard: the first kernel sets it to 1 at its start and its
// last block to complete sets it to 0, so a rank whose node kernel gave up
// (or was late) sends 1 with a shard that is not this call's. The second
// kernel gives up on a nonzero sum before it pushes anything: the ranks of
// every node then fail the call instead of completing it with that shard.
//
// Each kernel is a call of its own on the device (begin_call:
// epochs e and e + 1), so the slots' reuse argument of
// collective_kernels.hpp holds unchanged: the first kernel's 'arrive' at e
// means every peer finished its call e - 1, the reader of the slot the
// second kernel writes (parity e + 1); the next call's first kernel (e + 2)
// writes parity e only after the second kernel saw every peer arrive at
// e + 1, i.e. after their first kernels (the readers of parity e) ended.
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

// After this block wrote its packs of the shard: the last block of the
// grid to get here clears the mark. The fences order block 0's setting of
// the mark, and every block's packs, before the clearing.
template <class T>
__device__ __forceinline__ void clear_mark_when_last(const PeerSet& p, T* mark) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence();
  std::uint32_t* done = &signals_of(p, p.rank)->node_blocks_done;
  if (atomicAdd(done, 1u) != gridDim.x - 1) return;
  *done = 0u;
  __threadfence();
  *mark = from_float<T>(0.0f);
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    node_reduce_scatter_kernel(const __grid_constant__ PeerSet p, const T* in, T* node_shard,
                               const __grid_constant__ KernelLayout layout, std::int64_t count) {
  std::uint32_t epoch;
  const bool running = begin_call(p, epoch);  // past the previous kernel, even when not running
  constexpr int V = Pack<T>::kCount;
  const std::int64_t shard = shard_elements<V>(count, p.size);
  T* const mark = node_shard + node_mark_offset(shard_range(count, shard, p.rank), V);
  if (blockIdx.x == 0 && threadIdx.x == 0) *mark = from_float<T>(1.0f);
  if (!running) return;
  const two_shot::PackWalk walk = two_shot::pack_walk();

  if (!two_shot::push_shards_then_wait(p, in, layout, count, shard, epoch, walk)) return;
  for (std::int64_t j = walk.begin; j < shard / V; j += walk.stride) {
    const std::int64_t first = p.rank * shard + j * V;
    if (first >= count) break;
    *reinterpret_cast<uint4*>(node_shard + j * V) =
        two_shot::reduce_sources<T>(p, epoch, first).raw;
  }
  clear_mark_when_last(p, mark);
}

// Whether every member's node kernel completed the call (the mark's sum
// between nodes is 0; NaN is not). On any other sum the block gives up
// (every thread returns false) and tells the node's peers.
template <class T>
__device__ __forceinline__ bool node_sum_is_this_calls(const PeerSet& p, const T* mark,
                                                       std::uint32_t epoch) {
  const int missing = threadIdx.x == 0 && !(to_float(*mark) == 0.0f);
  if (missing) give_up(p, ErrorCode::node_shard_missing, Phase::none, epoch, p.rank);
  return __syncthreads_or(missing) == 0;
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    node_all_gather_kernel(const __grid_constant__ PeerSet p, const T* node_shard, T* out,
                           const __grid_constant__ KernelLayout layout, std::int64_t count) {
  std::uint32_t epoch;
  if (!begin_call(p, epoch)) return;
  constexpr int V = Pack<T>::kCount;
  const std::int64_t shard = shard_elements<V>(count, p.size);
  const T* mark = node_shard + node_mark_offset(shard_range(count, shard, p.rank), V);
  if (!node_sum_is_this_calls(p, mark, epoch)) {
    return;
  }
  const two_shot::PackWalk walk = two_shot::pack_walk();
  const bool out_vec = layout.dense && aligned16(out);

  for (std::int64_t j = walk.begin; j < shard / V; j += walk.stride) {
    const std::int64_t first = p.rank * shard + j * V;
    if (first >= count) break;
    Pack<T> sum;
    sum.raw = *reinterpret_cast<const uint4*>(node_shard + j * V);
    two_shot::push_reduced(p, epoch, first, sum);
    store_tensor(out, layout, out_vec, first, count, sum);
  }
  two_shot::wait_then_gather(p, out, layout, out_vec, count, shard, epoch, walk);
}

}  // namespace

namespace detail {

// A thread per pack of a shard, as the two-shot. The first kernel may
// overlap the previous kernel's tail (PDL) like the two-shot; the second
// follows the step between nodes (an NCCL kernel or a copy), so it is a
// plain launch.
KernelStep node_reduce_scatter_step(const PeerSet& shape, ElementType type, std::int64_t shard) {
  return grid_step(
      type, [](auto tag) { return node_reduce_scatter_kernel<decltype(tag)>; },
      [&](auto tag) { return packs_for<decltype(tag)>(shard); }, kTwoShotMaxBlocks,
      shape.overlap_launch);
}

KernelStep node_all_gather_step(ElementType type, std::int64_t shard) {
  return grid_step(
      type, [](auto tag) { return node_all_gather_kernel<decltype(tag)>; },
      [&](auto tag) { return packs_for<decltype(tag)>(shard); }, kTwoShotMaxBlocks,
      /*programmatic=*/false);
}

}  // namespace detail

}  // namespace peerplan::cuda_kernels
