// SPDX-License-Identifier: Apache-2.0
// All-reduce by pull: every rank reads its peers' inputs over the link
// instead of having them pushed into its slot. Two uses:
//  - zero copy: an input that lies in a registered buffer is read by the
//    peers in place (no staging copy), which is what CUDA-graph-captured
//    inputs want;
//  - links where reads beat posted writes (some PCIe topologies), chosen
//    with TransferMode::pull.
// A rank whose input is not registered copies it into its own slot (a local
// copy) and the peers read it there. Each rank publishes where its input is
// (PullSource) in every peer's signal area before its arrive flag, so ranks
// may mix registered and staged inputs freely.
//
// Sums are fp32 in rank order 0..n-1 with one rounding, as in the push
// kernels, so pull and push results are bit-identical too.
#include <cstring>
#include <type_traits>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "element_ops.cuh"
#include "launch_recipe.hpp"
#include "launch_shape.cuh"
#include "recipe_steps.cuh"
#include "shard_geometry.cuh"

namespace peerplan::cuda_kernels {
namespace {

template <class T>
__device__ __forceinline__ T load_volatile_element(const T* address) {
  using Bits = std::conditional_t<sizeof(T) == 2, unsigned short, unsigned int>;
  const Bits bits = *reinterpret_cast<const volatile Bits*>(address);
  T value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

// Elements [first, first + kCount) of a contiguous source (zeros past
// `count`): one 16-byte load when the source is aligned and the pack whole.
template <class T>
__device__ __forceinline__ Pack<T> load_source(const T* source, std::int64_t first,
                                               std::int64_t count) {
  Pack<T> pack;
  if (aligned16(source) && first + Pack<T>::kCount <= count) {
    pack.raw = load_volatile_pack(source + first);
    return pack;
  }
  for (int k = 0; k < Pack<T>::kCount && first + k < count; ++k) {
    pack.v[k] = load_volatile_element(source + first + k);
  }
  return pack;
}

template <class T>
__device__ __forceinline__ Pack<T> sum_sources(const PeerSet& p, const T* const* sources,
                                               std::int64_t first, std::int64_t count) {
  constexpr int V = Pack<T>::kCount;
  float acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) acc[k] = 0.0f;
  for (int r = 0; r < p.size; ++r) {
    const Pack<T> in = load_source(sources[r], first, count);
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = __fadd_rn(acc[k], to_float(in.v[k]));
  }
  Pack<T> out;
#pragma unroll
  for (int k = 0; k < V; ++k) out.v[k] = from_float<T>(acc[k]);
  return out;
}

// Thread q tells peer q where this rank's input is; the same thread's
// arrive flag (signal_peers, after a block barrier) releases it. Every
// block writes the same word: whichever block's flag a peer block
// acquires, the word precedes it.
__device__ __forceinline__ void publish_source(const PeerSet& p, std::uint32_t epoch,
                                               PullSource source) {
  const int q = threadIdx.x;
  if (q < p.size && q != p.rank) {
    volatile PullSource* word = &signals_of(p, q)->sources[epoch & 1u][p.rank];
    word->buffer = source.buffer;
    word->offset = source.offset;
  }
}

// sources[r] = where rank r's input is readable from this device. Thread r
// resolves rank r: it is the thread whose acquire saw r's arrive flag.
// False on every thread when a peer named a buffer this rank has no
// mapping for (deregistered under a captured graph).
template <class T>
__device__ __forceinline__ bool resolve_sources(const PeerSet& p, std::uint32_t epoch,
                                                const T* own_input, const T** sources) {
  int failed = 0;
  const int r = threadIdx.x;
  if (r == p.rank) {
    sources[r] = own_input;
  } else if (r < p.size) {
    const volatile PullSource* word = &signals_of(p, p.rank)->sources[epoch & 1u][r];
    const std::uint32_t buffer = word->buffer;
    const std::uint64_t offset = word->offset;
    if (buffer == kStagedSource) {
      sources[r] = data_of<T>(p, r, r, epoch);
    } else {
      const void* base = buffer < static_cast<std::uint32_t>(kMaxRegisteredBuffers)
                             ? p.registry[r * kMaxRegisteredBuffers + buffer]
                             : nullptr;
      if (base == nullptr) {
        give_up(p, ErrorCode::unregistered_buffer, Phase::arrive, epoch, r);
        failed = 1;
      } else {
        sources[r] = reinterpret_cast<const T*>(static_cast<const char*>(base) + offset);
      }
    }
  }
  return __syncthreads_or(failed) == 0;
}

// Two-shot pull's reduced shard of `owner`, in owner's own sub-slot.
template <class T>
__device__ __forceinline__ T* result_of(const PeerSet& p, int owner, std::uint32_t epoch) {
  return reinterpret_cast<T*>(data_of<char>(p, owner, owner, epoch) + p.result_offset);
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    pull_one_shot_kernel(const __grid_constant__ PeerSet p, const T* in, T* out,
                         const __grid_constant__ KernelLayout layout, std::int64_t count,
                         PullSource source) {
  __shared__ const T* sources[kMaxRanks];
  std::uint32_t epoch;
  if (!begin_call(p, epoch)) return;
  Signals* own = signals_of(p, p.rank);

  constexpr int V = Pack<T>::kCount;
  const std::int64_t packs = (count + V - 1) / V;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool staged = source.buffer == kStagedSource;
  T* own_slot = data_of<T>(p, p.rank, p.rank, epoch);
  if (staged) {
    const bool in_vec = layout.dense && aligned16(in);
    for (std::int64_t j = begin; j < packs; j += stride) {
      *reinterpret_cast<uint4*>(own_slot + j * V) =
          load_tensor(in, layout, in_vec, j * V, count).raw;
    }
  }
  publish_source(p, epoch, source);
  __syncthreads();
  signal_peers(p, FlagRow::arrive, epoch);
  if (!wait_peers(p, own->arrive[blockIdx.x], epoch, Phase::arrive, epoch)) return;
  if (!resolve_sources<T>(p, epoch, staged ? own_slot : in, sources)) return;

  const bool out_vec = layout.dense && aligned16(out);
  for (std::int64_t j = begin; j < packs; j += stride) {
    store_tensor(out, layout, out_vec, j * V, count, sum_sources<T>(p, sources, j * V, count));
  }
  // A registered input is the caller's memory: the kernel may end (and the
  // stream overwrite it) only once every peer has read it. A staged one
  // lives in slot epoch % 2, which the next call does not touch.
  __syncthreads();
  signal_peers(p, FlagRow::done, epoch);
  if (!staged && !wait_peers(p, own->done[blockIdx.x], epoch, Phase::done, epoch)) return;
}

// Shards as in the push two-shot. Reduce-scatter: rank s reads shard s of
// every rank's input and keeps the sum in its own sub-slot (result area);
// all-gather: every rank reads the other shards' sums from their owners.
// Peers read this rank's input only before they raise 'reduced', so the
// wait for 'reduced' also keeps a registered input alive long enough.
template <class T>
__global__ void __launch_bounds__(kThreads)
    pull_two_shot_kernel(const __grid_constant__ PeerSet p, const T* in, T* out,
                         const __grid_constant__ KernelLayout layout, std::int64_t count,
                         PullSource source) {
  __shared__ const T* sources[kMaxRanks];
  std::uint32_t epoch;
  if (!begin_call(p, epoch)) return;
  Signals* own = signals_of(p, p.rank);

  constexpr int V = Pack<T>::kCount;
  const std::int64_t shard = shard_elements<V>(count, p.size);
  const std::int64_t shard_packs = shard / V;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool staged = source.buffer == kStagedSource;
  T* own_slot = data_of<T>(p, p.rank, p.rank, epoch);
  if (staged) {
    // Block b stages exactly the packs that the peers' blocks b will read.
    const bool in_vec = layout.dense && aligned16(in);
    for (std::int64_t j = begin; j < shard_packs; j += stride) {
      for (int s = 0; s < p.size; ++s) {
        const std::int64_t first = s * shard + j * V;
        if (first >= count) break;
        *reinterpret_cast<uint4*>(own_slot + first) =
            load_tensor(in, layout, in_vec, first, count).raw;
      }
    }
  }
  publish_source(p, epoch, source);
  __syncthreads();
  signal_peers(p, FlagRow::arrive, epoch);
  if (!wait_peers(p, own->arrive[blockIdx.x], epoch, Phase::arrive, epoch)) return;
  if (!resolve_sources<T>(p, epoch, staged ? own_slot : in, sources)) return;

  const bool out_vec = layout.dense && aligned16(out);
  T* own_result = result_of<T>(p, p.rank, epoch);
  for (std::int64_t j = begin; j < shard_packs; j += stride) {
    const std::int64_t first = p.rank * shard + j * V;
    if (first >= count) break;
    const Pack<T> sum = sum_sources<T>(p, sources, first, count);
    *reinterpret_cast<uint4*>(own_result + first) = sum.raw;
    store_tensor(out, layout, out_vec, first, count, sum);
  }
  __syncthreads();
  signal_peers(p, FlagRow::reduced, epoch);
  if (!wait_peers(p, own->reduced[blockIdx.x], epoch, Phase::reduced, epoch)) return;

  for (std::int64_t j = begin; j < shard_packs; j += stride) {
    for (int s = 0; s < p.size; ++s) {
      if (s == p.rank) continue;
      const std::int64_t first = s * shard + j * V;
      if (first >= count) break;
      Pack<T> sum;
      sum.raw = load_volatile_pack(result_of<T>(p, s, epoch) + first);
      store_tensor(out, layout, out_vec, first, count, sum);
    }
  }
}

}  // namespace

namespace detail {

KernelStep pull_one_shot_step(const PeerSet& shape, ElementType type, std::int64_t count) {
  return grid_step(
      type, [](auto tag) { return pull_one_shot_kernel<decltype(tag)>; },
      [&](auto tag) { return packs_for<decltype(tag)>(count); }, kAllReduceMaxBlocks,
      shape.overlap_launch);
}

KernelStep pull_two_shot_step(const PeerSet& shape, ElementType type, std::int64_t shard) {
  return grid_step(
      type, [](auto tag) { return pull_two_shot_kernel<decltype(tag)>; },
      [&](auto tag) { return packs_for<decltype(tag)>(shard); }, kAllReduceMaxBlocks,
      shape.overlap_launch);
}

}  // namespace detail

}  // namespace peerplan::cuda_kernels
