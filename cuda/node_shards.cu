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

template <class T>
__global__ void __launch_bounds__(kThreads)
    node_reduce_scatter_kernel(const __grid_constant__ PeerSet p, const T* in, T* node_shard,
                               const __grid_constant__ KernelLayout layout, std::int64_t count) {
  std::uint32_t epoch;
  if (!begin_call(p, epoch)) return;
  constexpr int V = Pack<T>::kCount;
  const std::int64_t shard = shard_elements<V>(count, p.size);
  const two_shot::PackWalk walk = two_shot::pack_walk();

  if (!two_shot::push_shards_then_wait(p, in, layout, count, shard, epoch, walk)) return;
  for (std::int64_t j = walk.begin; j < shard / V; j += walk.stride) {
    const std::int64_t first = p.rank * shard + j * V;
    if (first >= count) break;
    *reinterpret_cast<uint4*>(node_shard + j * V) =
        two_shot::reduce_sources<T>(p, epoch, first).raw;
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    node_all_gather_kernel(const __grid_constant__ PeerSet p, const T* node_shard, T* out,
                           const __grid_constant__ KernelLayout layout, std::int64_t count) {
  std::uint32_t epoch;
  if (!begin_call(p, epoch)) return;
  constexpr int V = Pack<T>::kCount;
  const std::int64_t shard = shard_elements<V>(count, p.size);
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
