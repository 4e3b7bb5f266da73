// SPDX-License-Identifier: Apache-2.0
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
// A large message runs as consecutive two-shots of pieces (LaunchRecipe::
// pieces), each with its own epoch and its own place in every area (the
// piece's index times the first piece's shard), pipelined over three
// streams: every piece's copies out on DmaStreams::out, back to back; on
// the call's stream, piece i's kernel after its copies out; piece i's
// copies back on DmaStreams::back after its kernel. So the copy engines
// move piece i + 1 while the SMs add piece i, and only the last piece's
// add and copies back are not hidden. Events order the streams: `out` and
// `back` start after the call's stream reached the call (`start`), and
// the call's stream goes on only after the last copy back (`done`), which
// also joins both streams into a CUDA-graph capture of the call.
//
// The region is the protocol's own (collective_kernels.hpp: PeerSet::
// dma_offset), outside the staging slots, whose parity the copies cannot
// follow (a copy's addresses are fixed when it is enqueued or captured).
// Reusing it needs no extra wait: a rank's copies of the next call into
// peer q's area start after its kernel saw q's 'reduced', which q's blocks
// raise after their last read of the areas; q's kernel of the next call
// overwrites its own area q only after every peer's 'arrive' of that call,
// which a peer raises after its copies back (the last reads of area q) of
// this one. With pieces, the same holds piece by piece (each piece has
// its own place, and a call's streams start after the previous call's
// last copy back). The waits are the kernel's, bounded like every other;
// the copies never wait.
#include <cstddef>
#include <cstdint>
#include <vector>

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
                        const __grid_constant__ KernelLayout layout, std::int64_t count,
                        std::uint64_t area_offset) {
  std::uint32_t epoch;
  if (!begin_call(p, epoch)) return;
  signal_peers(p, FlagRow::arrive, epoch);
  if (!wait_peers(p, signals_of(p, p.rank)->arrive[blockIdx.x], epoch, Phase::arrive, epoch)) {
    return;
  }
  constexpr int V = Pack<T>::kCount;
  const std::int64_t shard = shard_elements<V>(count, p.size);
  const two_shot::PackWalk walk = two_shot::pack_walk();
  const bool in_vec = aligned16(in);
  const bool out_vec = aligned16(out);
  T* const reduced = reinterpret_cast<T*>(dma_area(p, p.rank, p.rank) + area_offset);
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
            reinterpret_cast<const T*>(dma_area(p, p.rank, s) + area_offset) + j * V);
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
}

}  // namespace

namespace detail {

KernelStep two_shot_dma_step(ElementType type, std::int64_t shard) {
  // After a copy, not a kernel: a programmatic launch would gain nothing.
  return grid_step(
      type, [](auto tag) { return two_shot_dma_kernel<decltype(tag)>; },
      [&](auto tag) { return packs_for<decltype(tag)>(shard); }, kTwoShotMaxBlocks, false);
}

int dma_pieces_for(std::size_t message_bytes) {
  const std::size_t pieces = message_bytes / kDmaPieceTargetBytes;
  return static_cast<int>(pieces < 1 ? 1 : pieces > kMaxDmaPieces ? kMaxDmaPieces : pieces);
}

namespace {

// One piece: `count` elements at element `first` of the message, its
// shards `shard` elements, at byte `area_offset` of every area.
struct DmaPiece {
  std::int64_t first = 0;
  std::int64_t count = 0;
  std::int64_t shard = 0;
  std::uint64_t area_offset = 0;
};

DmaPiece piece_of(const LaunchRecipe& recipe, int ranks, int i) {
  const std::size_t element = element_bytes(recipe.type);
  const int pack = static_cast<int>(kPackBytes / element);
  DmaPiece piece;
  piece.first = static_cast<std::int64_t>(i) * recipe.piece_elements;
  const std::int64_t rest = recipe.count - piece.first;
  piece.count = rest < recipe.piece_elements ? rest : recipe.piece_elements;
  piece.shard = shard_elements_of(piece.count, ranks, pack);
  piece.area_offset = static_cast<std::uint64_t>(i) * recipe.shard_elements * element;
  return piece;
}

// Peer q's shard of a piece in bytes from the piece's start: [offset, offset + bytes).
std::size_t shard_bytes(const DmaPiece& piece, std::size_t element, int q, std::size_t& offset) {
  const ShardRange range = shard_range(piece.count, piece.shard, q);
  offset = static_cast<std::size_t>(range.begin) * element;
  return static_cast<std::size_t>(range.end - range.begin) * element;
}

// copy(q, offset, bytes) for every peer q's shard of the piece
// ([offset, offset + bytes) from the piece's start; empty shards skipped),
// each rank starting with the next one, so that the first copies of all
// ranks go to different peers. Stops at the first copy that fails.
template <class CopyShard>
cudaError_t for_each_peer_shard(const LaunchRecipe& recipe, const PeerSet& peers,
                                const DmaPiece& piece, CopyShard&& copy) {
  const std::size_t element = element_bytes(recipe.type);
  for (int k = 1; k < peers.size; ++k) {
    const int q = (peers.rank + k) % peers.size;
    std::size_t offset = 0;
    const std::size_t bytes = shard_bytes(piece, element, q, offset);
    if (bytes == 0) continue;
    if (const cudaError_t status = copy(q, offset, bytes); status != cudaSuccess) return status;
  }
  return cudaSuccess;
}

// Shard q of the piece of `in` -> rank q's area <own rank>, for every peer
// q. cudaMemcpyDefault: the runtime takes the devices from the (unified)
// addresses, a peer's slab included.
cudaError_t copy_out(const LaunchRecipe& recipe, const PeerSet& peers, const DmaPiece& piece,
                     const char* in, cudaStream_t stream) {
  return for_each_peer_shard(
      recipe, peers, piece, [&](int q, std::size_t offset, std::size_t bytes) {
        return cudaMemcpyAsync(dma_area(peers, q, peers.rank) + piece.area_offset, in + offset,
                               bytes, cudaMemcpyDefault, stream);
      });
}

// Every peer q's reduced shard of the piece (its area q) -> `out`.
cudaError_t copy_back(const LaunchRecipe& recipe, const PeerSet& peers, const DmaPiece& piece,
                      char* out, cudaStream_t stream) {
  return for_each_peer_shard(
      recipe, peers, piece, [&](int q, std::size_t offset, std::size_t bytes) {
        return cudaMemcpyAsync(out + offset, dma_area(peers, q, q) + piece.area_offset, bytes,
                               cudaMemcpyDefault, stream);
      });
}

cudaError_t reduce(const LaunchRecipe& recipe, const PeerSet& peers, const DmaPiece& piece,
                   const char* in, char* out, cudaStream_t stream) {
  // (PeerSet, const T* in, T* out, KernelLayout, count, area_offset): the
  // piece's pointers, a dense layout (copy-engine plans are contiguous).
  void* const peer_set = const_cast<PeerSet*>(&peers);
  KernelLayout layout = recipe.layout;
  std::int64_t count = piece.count;
  std::uint64_t area_offset = piece.area_offset;
  void* args[] = {peer_set, &in, &out, &layout, &count, &area_offset};
  return launch_step(recipe.steps[0], args, stream);
}

}  // namespace

cudaError_t launch_two_shot_dma(const LaunchRecipe& recipe, const PeerSet& peers, const void* in,
                                void* out, const DmaStreams* streams, cudaStream_t stream) {
  const std::size_t element = element_bytes(recipe.type);
  const auto* source = static_cast<const char*>(in);
  auto* target = static_cast<char*>(out);
  if (recipe.pieces <= 1) {
    const DmaPiece whole = piece_of(recipe, peers.size, 0);
    cudaError_t status = copy_out(recipe, peers, whole, source, stream);
    if (status == cudaSuccess) status = reduce(recipe, peers, whole, source, target, stream);
    if (status == cudaSuccess) status = copy_back(recipe, peers, whole, target, stream);
    return status;
  }
  if (streams == nullptr || recipe.pieces > kMaxDmaPieces) return cudaErrorInvalidValue;
  // Each step runs only while every earlier one succeeded; the first
  // failure is the call's status.
  cudaError_t status = cudaSuccess;
  const auto then = [&status](cudaError_t next) {
    if (status == cudaSuccess) status = next;
    return status == cudaSuccess;
  };
  then(cudaEventRecord(streams->start, stream));
  then(cudaStreamWaitEvent(streams->out, streams->start, 0));
  then(cudaStreamWaitEvent(streams->back, streams->start, 0));
  for (int i = 0; i < recipe.pieces; ++i) {
    const DmaPiece piece = piece_of(recipe, peers.size, i);
    const std::size_t at = static_cast<std::size_t>(piece.first) * element;
    then(copy_out(recipe, peers, piece, source + at, streams->out));
    then(cudaEventRecord(streams->copied_out[i], streams->out));
  }
  for (int i = 0; i < recipe.pieces; ++i) {
    const DmaPiece piece = piece_of(recipe, peers.size, i);
    const std::size_t at = static_cast<std::size_t>(piece.first) * element;
    then(cudaStreamWaitEvent(stream, streams->copied_out[i], 0));
    then(reduce(recipe, peers, piece, source + at, target + at, stream));
    then(cudaEventRecord(streams->reduced[i], stream));
    then(cudaStreamWaitEvent(streams->back, streams->reduced[i], 0));
    then(copy_back(recipe, peers, piece, target + at, streams->back));
  }
  then(cudaEventRecord(streams->done, streams->back));
  then(cudaStreamWaitEvent(stream, streams->done, 0));
  return status;
}

}  // namespace detail

cudaError_t create_dma_streams(DmaStreams& streams) {
  streams = DmaStreams{};
  cudaError_t status = cudaStreamCreateWithFlags(&streams.out, cudaStreamNonBlocking);
  if (status == cudaSuccess)
    status = cudaStreamCreateWithFlags(&streams.back, cudaStreamNonBlocking);
  std::vector<cudaEvent_t*> events{&streams.start, &streams.done};
  for (int i = 0; i < kMaxDmaPieces; ++i) {
    events.push_back(&streams.copied_out[i]);
    events.push_back(&streams.reduced[i]);
  }
  for (cudaEvent_t* event : events) {
    if (status == cudaSuccess) status = cudaEventCreateWithFlags(event, cudaEventDisableTiming);
  }
  if (status != cudaSuccess) {
    destroy_dma_streams(streams);
    cudaGetLastError();
  }
  return status;
}

void destroy_dma_streams(DmaStreams& streams) {
  if (streams.out != nullptr) cudaStreamDestroy(streams.out);
  if (streams.back != nullptr) cudaStreamDestroy(streams.back);
  for (cudaEvent_t event : {streams.start, streams.done}) {
    if (event != nullptr) cudaEventDestroy(event);
  }
  for (int i = 0; i < kMaxDmaPieces; ++i) {
    if (streams.copied_out[i] != nullptr) cudaEventDestroy(streams.copied_out[i]);
    if (streams.reduced[i] != nullptr) cudaEventDestroy(streams.reduced[i]);
  }
  streams = DmaStreams{};
}

}  // namespace peerplan::cuda_kernels
