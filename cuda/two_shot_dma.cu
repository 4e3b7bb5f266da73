// The two-shot all-reduce by copy engines (Protocol::dma), contiguous
// layouts only. The bytes cross the link by cudaMemcpyAsync, which the
// copy engines run at their own rate (on 2x H200, 391 GB/s per direction
// against the SMs' 363: benchmarks/RESULTS.md, the limits); the SMs only
// add. Per call, on the caller's stream:
//
//   1. copies out: shard q of `in` -> rank q's region, area <own rank>,
//      for every peer q;
//   2. the kernel: barrier 'arrive' (every peer's copies into this rank's
//      region are done: they precede its kernel on its stream), then this
//      rank's shard summed - fp32 in rank order 0..n-1, one rounding, the
//      staged two-shot's sums, so the same bits - into `out` and into its
//      own area <own rank>, then barrier 'reduced';
//   3. copies back: rank q's reduced shard (its area q) -> `out`, for
//      every peer q.
//
// The region is the protocol's own (collective_kernels.hpp: PeerSet::
// dma_offset), outside the staging slots, whose parity the copies cannot
// follow (a copy's addresses are fixed when it is enqueued or captured).
// Reusing it needs no extra wait: a rank's copies of the next call into
// peer q's area start after its kernel saw q's 'reduced', which q's blocks
// raise after their last read of the areas; q's kernel of the next call
// overwrites its own area q only after every peer's 'arrive' of that call,
// which a peer raises after its copies back (the last reads of area q) of
// this one. The waits are the kernel's, bounded like every other; the
// copies never wait.
#include <cstddef>
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

// Area `area` of rank `owner`'s copy-engine region, as this device maps it.
__host__ __device__ __forceinline__ char* dma_area(const PeerSet& p, int owner, int area) {
  return static_cast<char*>(p.slabs[owner]) + p.dma_offset +
         static_cast<std::uint64_t>(area) * p.dma_area_bytes;
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    two_shot_dma_kernel(const __grid_constant__ PeerSet p, const T* in, T* out,
                        const __grid_constant__ KernelLayout layout, std::int64_t count) {
  std::uint32_t epoch, ticket;
  if (!begin_call(p, epoch, ticket)) return;
  signal_peers(p, FlagRow::arrive, epoch);
  if (!wait_peers(p, signals_of(p, p.rank)->arrive[blockIdx.x], epoch, Phase::arrive, epoch)) {
    return;
  }
  constexpr int V = Pack<T>::kCount;
  const std::int64_t shard = shard_elements<V>(count, p.size);
  const two_shot::PackWalk walk = two_shot::pack_walk();
  const bool in_vec = aligned16(in);
  const bool out_vec = aligned16(out);
  T* const reduced = reinterpret_cast<T*>(dma_area(p, p.rank, p.rank));
  for (std::int64_t j = walk.begin; j < shard / V; j += walk.stride) {
    const std::int64_t first = p.rank * shard + j * V;
    if (first >= count) break;
    // Every load in flight before the first add.
    const Pack<T> own = load_tensor(in, layout, in_vec, first, count);
    uint4 parts[kMaxRanks];
#pragma unroll
    for (int s = 0; s < kMaxRanks; ++s) {
      if (s >= p.size) break;
      if (s != p.rank) {
        parts[s] = *reinterpret_cast<const uint4*>(
            reinterpret_cast<const T*>(dma_area(p, p.rank, s)) + j * V);
      }
    }
    RankOrderSum<T> acc;
#pragma unroll
    for (int s = 0; s < kMaxRanks; ++s) {
      if (s >= p.size) break;
      if (s == p.rank) {
        acc.add(own);
      } else {
        Pack<T> source;
        source.raw = parts[s];
        acc.add(source);
      }
    }
    const Pack<T> sum = acc.rounded();
    store_tensor(out, layout, out_vec, first, count, sum);
    *reinterpret_cast<uint4*>(reduced + j * V) = sum.raw;
  }
  __syncthreads();
  signal_peers(p, FlagRow::reduced, epoch);
  if (!wait_peers(p, signals_of(p, p.rank)->reduced[blockIdx.x], epoch, Phase::reduced, epoch)) {
    return;
  }
  finish_call(p, epoch, ticket);
}

}  // namespace

namespace detail {

KernelStep two_shot_dma_step(ElementType type, std::int64_t shard) {
  // After a copy, not a kernel: a programmatic launch would gain nothing.
  return grid_step(
      type, [](auto tag) { return two_shot_dma_kernel<decltype(tag)>; },
      [&](auto tag) { return packs_for<decltype(tag)>(shard); }, kTwoShotMaxBlocks, false);
}

cudaError_t launch_two_shot_dma(const LaunchRecipe& recipe, const PeerSet& peers, const void* in,
                                void* out, cudaStream_t stream) {
  const std::size_t element = element_bytes(recipe.type);
  // Peer q's shard, in bytes: [offset, offset + bytes).
  const auto shard_bytes = [&](int q, std::size_t& offset) {
    const ShardRange range = shard_range(recipe.count, recipe.shard_elements, q);
    offset = static_cast<std::size_t>(range.begin) * element;
    return static_cast<std::size_t>(range.end - range.begin) * element;
  };
  // Each rank starts with the next one, so that the first copies of all
  // ranks go to different peers. cudaMemcpyDefault: the runtime takes the
  // devices from the (unified) addresses, a peer's slab included.
  for (int k = 1; k < peers.size; ++k) {
    const int q = (peers.rank + k) % peers.size;
    std::size_t offset = 0;
    const std::size_t bytes = shard_bytes(q, offset);
    if (bytes == 0) continue;
    const cudaError_t status =
        cudaMemcpyAsync(dma_area(peers, q, peers.rank), static_cast<const char*>(in) + offset,
                        bytes, cudaMemcpyDefault, stream);
    if (status != cudaSuccess) return status;
  }
  // (PeerSet, const T* in, T* out, KernelLayout, count)
  void* const peer_set = const_cast<PeerSet*>(&peers);
  void* const layout = const_cast<KernelLayout*>(&recipe.layout);
  void* const count = const_cast<std::int64_t*>(&recipe.count);
  void* args[] = {peer_set, &in, &out, layout, count};
  const cudaError_t status = launch_step(recipe.steps[0], args, stream);
  if (status != cudaSuccess) return status;
  for (int k = 1; k < peers.size; ++k) {
    const int q = (peers.rank + k) % peers.size;
    std::size_t offset = 0;
    const std::size_t bytes = shard_bytes(q, offset);
    if (bytes == 0) continue;
    const cudaError_t copied = cudaMemcpyAsync(static_cast<char*>(out) + offset,
                                               dma_area(peers, q, q), bytes,
                                               cudaMemcpyDefault, stream);
    if (copied != cudaSuccess) return copied;
  }
  return cudaSuccess;
}

}  // namespace detail

}  // namespace peerplan::cuda_kernels
