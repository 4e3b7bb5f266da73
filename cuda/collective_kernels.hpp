// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's kernels as the host sees them (docs/design.md, Protocols;
// Signals and epochs): the types every kernel takes (PeerSet, KernelLayout,
// PullSource, the error word), the slab's sizes, and host launchers. Only the
// CUDA transport (src/transport/cuda/, compiled with the toolkit) includes
// this; nothing outside it sees CUDA types.
//
// A declared plan's P2P calls launch through LaunchRecipes
// (launch_recipe.hpp: decided once at declare, launched per call). One file
// per algorithm holds its kernel and its launch shape: one_shot_ll.cu,
// one_shot_lamport.cu, two_shot.cu, pull_kernels.cu, fused_ll.cu,
// fused_lamport.cu, fused_staged.cu, row_norm.cu (add + RMSNorm), pack.cu,
// two_shot_dma.cu, two_shot_lamport.cu;
// launch_recipe.cu assembles and launches them; shard_geometry.cuh has the
// two-shot shards, slab_sizing.cu the sizes below, device_sync.cuh the flag
// protocol, ll_lines.cuh the LL lines, lamport.cuh the Lamport region.
//
// Every rank owns one device slab [signal area | staging slot 0 | slot 1 |
// copy-engine region, when a two-shot may run on copy engines | Lamport
// region, when a Lamport kernel may run] mapped into its
// node-local peers through CUDA IPC; a slot holds one sub-slot per source
// rank (the Lamport region: see cuda/lamport.cuh). A call with
// epoch e (counted on the device, in
// the owner's signal area, so CUDA-graph replays need no host patching)
// uses slot e % 2. Data moves by push: a rank *writes* its contribution
// into sub-slot <own rank> of the peers' slots (posted NVLink/PCIe writes),
// then raises a flag; every read after the barrier is local. Flags are epochs written
// with system-scope release stores into the *reader's* signal area and
// polled there with acquire loads: no peer atomics. Reusing slot e % 2 at
// call e + 2 needs no extra wait: call e + 1 already saw every peer arrive,
// which a peer does only after its call e (the last reader) finished. Calls
// on one communicator must therefore be stream-ordered on every rank. Every
// spin is bounded by `timeout_ns` (%globaltimer); a spin that expires
// records the failure in `error` (host-mapped memory), tells the peers it
// gave up, and returns: never a hang, never a trap.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace peerplan::cuda_kernels {

inline constexpr int kMaxRanks = 8;
inline constexpr int kMaxBlocks = 128;          // per-block flags exist for this many blocks
inline constexpr int kMaxOneShotBlocks = 1024;  // the one-shot kernel has none
// The largest grid of any kernel that takes part in a call (begin_call):
// each of its blocks reads the epoch from a word of its own.
inline constexpr int kMaxCallBlocks = 1024;
static_assert(kMaxBlocks <= kMaxCallBlocks && kMaxOneShotBlocks <= kMaxCallBlocks);
inline constexpr std::size_t kSignalAreaBytes = 20480;
inline constexpr std::size_t kPackBytes = 16;  // one vector load/store

enum class ElementType : std::uint8_t { f16 = 0, bf16 = 1, f32 = 2 };

// Which wait a failed kernel was in.
enum class Phase : std::uint32_t { none = 0, arrive = 2, reduced = 3, done = 4 };
enum class ErrorCode : std::uint32_t {
  none = 0,
  timeout = 1,
  peer_gave_up = 2,
  // A pull call named a registered buffer that is not (or no longer)
  // registered on this rank's view: buffers were deregistered after a
  // graph that reads them was captured.
  unregistered_buffer = 3,
  // The hierarchical route's sum between nodes carried the mark of a rank
  // (same local rank, another node) whose node kernel did not complete: the
  // sum is not this call's (node_shards.cu).
  node_shard_missing = 4,
};

// DeviceError::peer at or above this: the kernel found at its start that
// rank peer - kLatePeer had already given up on the call.
inline constexpr std::uint32_t kLatePeer = kMaxRanks;

// In pinned, mapped host memory: the device writes, the host reads at the
// next call. `code` is written last.
struct DeviceError {
  std::uint32_t code;
  std::uint32_t epoch;
  std::uint32_t phase;
  // The local rank waited for, or kLatePeer + q where the kernel found at
  // its start that rank q had already given up on the call (this rank was
  // late): a field of its own cost the fused LL kernel registers.
  std::uint32_t peer;
  std::uint32_t block;
  // With kLatePeer + q: the word rank q left in this rank's abandoned[]
  // (give_up_mark.cuh), which names the call q gave up on. That may be an
  // earlier call than `epoch`, one this rank's kernel completed late.
  std::uint32_t peer_mark;
  std::uint32_t reserved[2];
};

// A tensor's element layout as the kernels see it. `dense`: element i at
// offset i (strides of size-1 dims ignored); otherwise offsets come from
// dims/strides (the innermost stride is 1, validated at declare).
struct KernelLayout {
  std::int32_t rank = 0;
  std::int32_t dense = 1;
  std::int64_t dims[8] = {};
  std::int64_t strides[8] = {};
};

// The node-local ranks' slabs, by local rank (own included). Passed by value
// to every kernel: it changes only when reserve() re-creates the slabs.
struct PeerSet {
  void* slabs[kMaxRanks] = {};
  std::int32_t rank = 0;
  std::int32_t size = 0;
  std::uint64_t slot_bytes = 0;      // each staging slot: size * sub_slot_bytes
  std::uint64_t sub_slot_bytes = 0;  // one source rank's part of a slot
  std::uint64_t timeout_ns = 0;
  DeviceError* error = nullptr;  // device pointer of the host-mapped error word
  // Pull kernels only. Device table [size][kMaxRegisteredBuffers]: local
  // rank r's registered buffer j as mapped on this device (null: none).
  void* const* registry = nullptr;
  // Where, inside a sub-slot, two-shot pull keeps its reduced shard.
  std::uint64_t result_offset = 0;
  // The Lamport receive region (cuda/lamport.cuh; the one-shot, the
  // two-shot and the fused op share it): its byte offset in every slab, and one source's
  // sub-slot in it (a parity holds size - 1 of them; 0: no region).
  std::uint64_t lamport_offset = 0;
  std::uint64_t lamport_sub_slot_bytes = 0;
  // Host only: the largest message the region holds (0: none): prepare
  // refuses Lamport plans above it. (Which plans take which protocol is the
  // router's choice, from the transport's ProtocolWindows.)
  std::uint64_t lamport_max_bytes = 0;
  // The copy-engine two-shot's region (cuda/two_shot_dma.cu): its byte
  // offset in every slab and one area's bytes (size areas; 0: no region).
  // In rank q's slab, area s != q receives q's shard of rank s's input,
  // area q holds q's reduced shard, which the peers copy out.
  std::uint64_t dma_offset = 0;
  std::uint64_t dma_area_bytes = 0;
  // Host only: the largest message the region holds (0: none).
  std::uint64_t dma_max_bytes = 0;
  // Host only: launch the P2P kernels as programmatic dependent launches
  // (compute capability 9.0+).
  bool overlap_launch = false;
  // Host only: the one-shot kernel's largest grid (it has no per-block
  // flags, so this may differ between ranks).
  std::int32_t one_shot_max_blocks = 80;
  // Host only: the LL fused kernel may split each row over a cluster of
  // blocks (sm_90+ code on an sm_90+ device; rows_in_clusters_supported()).
  bool cluster_rows = false;
};

// Pull calls: where this rank's input is. A registered buffer (index into
// the registry, byte offset inside it) is read by the peers in place - zero
// copy; kStagedSource makes the kernel copy the input into this rank's own
// slot first, from where the peers read it.
inline constexpr int kMaxRegisteredBuffers = 256;
inline constexpr std::uint32_t kStagedSource = 0xffffffffu;
struct PullSource {
  std::uint32_t buffer = kStagedSource;
  std::uint32_t reserved = 0;
  std::uint64_t offset = 0;
};

// For the fallbacks.
//
// The same add + RMSNorm from already reduced values (row_norm.cu):
// `reduced` holds rows * hidden contiguous elements (it may be `inout`
// itself when inout is dense). Rounds exactly like the fused kernels.
cudaError_t launch_add_rms_norm(ElementType type, const void* reduced, void* inout, void* residual,
                                const void* weight, float eps, const KernelLayout& layout,
                                std::int64_t rows, std::int64_t hidden, bool clusters,
                                cudaStream_t stream);
// Fixes, on the current device, the grids launch_add_rms_norm gives its
// rows (clusters or not, as it will be called), so that no call - nor a
// CUDA-graph capture - asks the occupancy calculator. Never fails: without
// an answer the grids stay at most kMaxRowBlocks units.
void prepare_add_rms_norm(bool clusters) noexcept;
// True when this device and this build can launch the fused kernel's row
// clusters (compute capability 9.0+ and sm_90+ device code): the results
// are the same bits either way, only the speed differs (fused_ll.cu).
bool rows_in_clusters_supported(int device);

// Strided tensor <-> contiguous buffer (row-major logical order; pack.cu).
cudaError_t launch_pack(std::size_t element_bytes, const void* tensor, void* contiguous,
                        const KernelLayout& layout, std::int64_t count, cudaStream_t stream);
cudaError_t launch_unpack(std::size_t element_bytes, const void* contiguous, void* tensor,
                          const KernelLayout& layout, std::int64_t count, cudaStream_t stream);

// The slab's sizes (slab_sizing.cu).
//
// Bytes one source's sub-slot needs for messages up to `max_message_bytes`
// on `size` ranks (two-shot pads every shard to whole packs; two-shot pull
// keeps its reduced shard at result_offset_for() in the same sub-slot); a
// slot is `size` of them.
std::size_t sub_slot_bytes_for(std::size_t max_message_bytes, int size);
std::size_t result_offset_for(std::size_t max_message_bytes, int size);
// Bytes one source's sub-slot of the Lamport region needs for messages up
// to `max_message_bytes` on `size` ranks, one-shot or two-shot (two
// shards); the region is 2 parities x (size - 1) of them and must be
// filled with all-ones bytes (the sentinel) before any peer can write into
// it.
inline constexpr unsigned char kLamportSentinelByte = 0xff;
std::size_t lamport_sub_slot_bytes_for(std::size_t max_message_bytes, int size);
// Bytes of one area of the copy-engine two-shot's region for messages up
// to `max_message_bytes` on `size` ranks: a shard, padded to whole packs;
// the region is `size` of them.
std::size_t dma_area_bytes_for(std::size_t max_message_bytes, int size);
// Offset in the signal area of the word that counts the calls of one block
// (device_sync.cuh, begin_call): the word a test seeds to start the epochs
// just before their 2^32 wrap (PEERPLAN_TEST_EPOCH_START).
std::size_t one_block_call_count_offset();

}  // namespace peerplan::cuda_kernels
