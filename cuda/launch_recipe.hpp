// SPDX-License-Identifier: Apache-2.0
// Launch recipes: what a declared plan decides once, so that a call only adds
// its pointers and its stream (docs/design.md, Launch shapes). Host-only API,
// included by the C++ transport (compiled by the host compiler): no device
// code, no CUDA syntax beyond the runtime API's types.
//
// prepare_all_reduce() / prepare_fused() run at declare time: they check
// that the algorithm can carry the message, and fix the kernel
// instantiation for the dtype, the grid, the block, the cluster, the launch
// attributes and the shard geometry - everything but the pointers - making
// any occupancy query there (never on a call's path, nor inside a CUDA-graph
// capture). launch() is the call: it builds the kernels' argument list from
// the recipe, the CURRENT PeerSet (the slabs change when the transport
// re-creates them; a recipe stays valid as long as the fields prepare read
// stay the same: size, one_shot_max_blocks, cluster_rows, overlap_launch,
// lamport_max_bytes) and the call's pointers, and enqueues
// the recipe's one or two kernels with cudaLaunchKernelExC.
//
// One file per algorithm holds its kernel and its launch shape (the
// *_step() functions of recipe_steps.cuh):
//   one_shot_ll              one_shot_ll.cu      push one-shot on LL lines
//   one_shot_lamport         one_shot_lamport.cu push one-shot, Lamport region (lamport.cuh)
//   two_shot                 two_shot.cu         push two-shot, staged + flag barrier
//   pull_one_shot/_two_shot  pull_kernels.cu     the same all-reduces by pull
//   fused_lamport            fused_lamport.cu    fused op, Lamport region
//   fused_ll                 fused_ll.cu         fused op, LL lines (clusters or blocks)
//   fused_staged             fused_staged.cu     fused op, staged packs + flag barrier
//   fused_two_shot_row_norm  two_shot.cu, then row_norm.cu (the add + RMSNorm kernel)
//   fused_two_shot_lamport_row_norm, fused_two_shot_dma_row_norm
//                            the same with two_shot_lamport.cu / two_shot_dma.cu first
//   fused_two_shot_rows      fused_two_shot_rows.cu the staged two-shot by whole rows, the
//                            add + RMSNorm in its all-gather (one kernel)
//   node_reduce_scatter,     node_shards.cu      the hierarchical route's kernels, before and
//   node_all_gather(_row_norm)                   after the step between nodes (+ row_norm.cu)
//   two_shot_dma             two_shot_dma.cu     copy engines move the shards, a kernel reduces
//   two_shot_lamport         two_shot_lamport.cu push two-shot, both phases in the Lamport region
// launch_recipe.cu holds prepare, launch and describe; shard_geometry.cuh
// the two-shot shards; slab_sizing.cu the slab's sizes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "collective_kernels.hpp"

namespace peerplan::cuda_kernels {

enum class Algorithm : std::uint8_t {
  one_shot_ll,       // push one-shot, LL lines
  one_shot_lamport,  // push one-shot, Lamport region
  two_shot,          // push two-shot, staged + flag barrier
  pull_one_shot,     // pull one-shot (PullSource: registered in place, or staged)
  pull_two_shot,     // pull two-shot
  fused_lamport,     // fused op, Lamport region (rows of whole 16-byte packs, fits the region)
  fused_ll,          // fused op, LL lines (rows of whole packs); a cluster per row when
                     // PeerSet::cluster_rows, else a block per row
  fused_staged,      // fused op, staged packs + flag barrier (any layout)
  fused_two_shot_row_norm,  // dense fused op: the two-shot all-reduce in place, then the
                            // add + RMSNorm row kernel
  // The hierarchical route (several nodes), around the step between nodes
  // that the transport runs: in -> this rank's shard of the node's sum at
  // `out` (contiguous) ...
  node_reduce_scatter,
  // ... then the shard summed over the nodes (`in`) -> every rank's `out`
  // (an all-reduce algorithm, the plan's layout) ...
  node_all_gather,
  // ... or, for the fused op, -> a dense buffer (`out`), then the add +
  // RMSNorm row kernel from it into inout / residual (any layout).
  node_all_gather_row_norm,
  // Two-shot by copy engines (contiguous layouts): the shards travel to
  // their owners by cudaMemcpyAsync, a kernel reduces this rank's shard,
  // the reduced shards come back by cudaMemcpyAsync (two_shot_dma.cu).
  two_shot_dma,
  // Two-shot through the Lamport region, any layout: both phases write
  // plain data that is its own flag (two_shot_lamport.cu).
  two_shot_lamport,
  // The dense fused op's two-shot + row norm with its all-reduce on the
  // Lamport two-shot / on copy engines (the protocol a plain two-shot of
  // the same bytes takes), then the same row kernel.
  fused_two_shot_lamport_row_norm,
  fused_two_shot_dma_row_norm,
  // The dense fused op's staged two-shot in one kernel: shards of whole
  // rows, the add + RMSNorm applied as the reduced rows are gathered (rows
  // that fused_two_shot_rows_fits; fused_two_shot_rows.cu).
  fused_two_shot_rows,
};

// "one-shot LL", "one-shot Lamport", "two-shot", "pull one-shot", "pull
// two-shot", "fused Lamport", "fused LL", "fused staged", "fused two-shot +
// row norm", "node reduce-scatter", "node all-gather", "node all-gather +
// row norm", "two-shot by copy engines", "two-shot Lamport", "fused
// two-shot Lamport + row norm", "fused two-shot by copy engines + row norm",
// "fused two-shot by rows" ("unknown" for a value outside the enum).
const char* to_string(Algorithm algorithm) noexcept;

// Rows of `hidden` elements that fused_two_shot_rows carries: whole 16-byte
// packs, at most kKeptPacks packs a thread of a block of kRowThreads (16384
// f16/bf16 or 8192 f32 elements). No CUDA call.
bool fused_two_shot_rows_fits(ElementType type, std::int64_t hidden) noexcept;
// The transport takes fused_two_shot_rows for rows of at least this many
// bytes: the kernel loop at equal grids measured it faster there and
// slower below (a block's rows are latency-bound). Its two-rank
// instantiation holds a pack per rank and wins from shorter rows
// (benchmarks/kernel-loop.md, "The fused two-shot in one kernel").
constexpr std::size_t fused_two_shot_rows_min_row_bytes(int ranks) noexcept {
  return ranks == 2 ? 8192 : 14336;
}

// One kernel launch, fully decided.
struct KernelStep {
  const void* kernel = nullptr;  // the __global__ function instantiated for the dtype
  unsigned blocks = 0;           // grid (x)
  unsigned threads = 0;          // block (x)
  unsigned cluster = 1;          // blocks per thread-block cluster (1: none)
  bool programmatic = false;     // programmatic dependent launch (PDL) attribute
  // Non-null: `kernel` takes only 16-byte aligned tensors, and this one (the
  // same parameters and grid) runs a call whose pointers are not.
  const void* unaligned_kernel = nullptr;
};

struct LaunchRecipe {
  Algorithm algorithm{};
  ElementType type{};
  KernelLayout layout{};
  std::int32_t ranks = 0;             // PeerSet::size at prepare; launch() checks it
  std::int64_t count = 0;             // elements
  std::int64_t rows = 0, hidden = 0;  // fused only (count == rows * hidden)
  std::int64_t shard_elements = 0;    // two-shot variants: elements per shard (whole packs)
  std::size_t message_bytes = 0;
  // Copy-engine two-shots: the message runs as `pieces` consecutive
  // two-shots of piece_elements each (the last one shorter), their copies
  // pipelined on the DmaStreams (1: one two-shot, all on the call's
  // stream). shard_elements and steps[0] are the first piece's.
  int pieces = 1;
  std::int64_t piece_elements = 0;
  KernelStep steps[2]{};
  int step_count = 0;
};

// The copy-engine two-shot's pipeline (two_shot_dma.cu): a message of
// several pieces copies them out on `out` and back on `back`, two streams
// of the transport's, so that the copies of the next pieces overlap the
// reduction of this one on the call's stream; the events order the three
// streams (and join the two into a CUDA-graph capture of the call).
inline constexpr int kMaxDmaPieces = 8;
// The size each piece of a copy-engine message aims at: the built-in
// default of the table in src/routing/defaults.hpp (a static_assert in the
// transport ties the two).
inline constexpr std::size_t kDmaPieceTargetBytes = std::size_t{8} << 20;
struct DmaStreams {
  cudaStream_t out = nullptr;
  cudaStream_t back = nullptr;
  cudaEvent_t start = nullptr;  // the call's stream reached the call
  cudaEvent_t done = nullptr;   // every copy back enqueued before it is done
  cudaEvent_t copied_out[kMaxDmaPieces] = {};
  cudaEvent_t reduced[kMaxDmaPieces] = {};
};
// Both streams (non-blocking) and every event (no timing) on the current
// device; on failure, what was created is destroyed again.
cudaError_t create_dma_streams(DmaStreams& streams);
void destroy_dma_streams(DmaStreams& streams);

// What a call adds to its recipe.
struct CallPointers {
  // All-reduce: in -> out (in == out allowed, except that a pull `source`
  // naming a registered buffer needs them apart).
  const void* in = nullptr;
  void* out = nullptr;
  // Fused op: residual = allreduce(inout) + residual; inout = rmsnorm(residual) * weight.
  void* inout = nullptr;
  void* residual = nullptr;
  const void* weight = nullptr;
  float eps = 0.0f;
  // Pull variants: where this rank's input is.
  PullSource source{};
  // Copy-engine recipes of several pieces: the pipeline's streams (null:
  // launch() refuses such a recipe).
  const DmaStreams* dma = nullptr;
  // node_all_gather_row_norm: the shard summed over the nodes is `in`, the
  // dense buffer of the reduced message (rows * hidden elements) is `out`.
};

// Everything but the pointers and the stream, decided once per declared
// plan. `shape` is the transport's PeerSet; only its rank-invariant and
// launch-shape fields are read (size, one_shot_max_blocks, cluster_rows,
// overlap_launch, lamport_max_bytes, lamport_sub_slot_bytes, dma_max_bytes,
// dma_area_bytes; not rank, not the slabs, which may be unset: launch()
// takes those from the current PeerSet).
//
// Returns cudaErrorInvalidValue, leaving `out` untouched and without any
// CUDA call, when the algorithm cannot carry the message: count (rows,
// hidden) <= 0; shape.size outside 1..kMaxRanks; a dtype outside
// ElementType; an all-reduce algorithm given to prepare_fused or the
// reverse; a one-shot or two_shot_lamport with shape.one_shot_max_blocks
// outside 1..kMaxOneShotBlocks; a one-shot Lamport or two_shot_lamport
// message above shape.lamport_max_bytes, or a two_shot_lamport one whose
// two shards exceed shape.lamport_sub_slot_bytes; fused_lamport / fused_ll rows that are not whole
// 16-byte packs; a fused Lamport message above shape.lamport_max_bytes or
// with more packs than the kernel's 32-bit pack index holds;
// a fused two-shot + row norm on a non-dense layout, its Lamport variant
// under the two_shot_lamport limits, its copy-engine variant above
// shape.dma_max_bytes; two_shot_dma on a non-dense layout, a message
// above shape.dma_max_bytes, or pieces whose shards overflow
// shape.dma_area_bytes. The limits that depend on
// the slab (a message larger than reserve() sized the slots for) are the
// caller's to check.
//
// prepare_fused(fused_lamport, and the row kernel of the *_row_norm
// algorithms) asks the occupancy calculator how many rows the CURRENT
// device holds at once (once per device and variant, cached; 128 clusters
// or blocks for fused_lamport, 1024 for the row kernel, when the query
// fails): prepare on the device the recipe will run on.
cudaError_t prepare_all_reduce(Algorithm algorithm, const PeerSet& shape, ElementType type,
                               const KernelLayout& layout, std::int64_t count, LaunchRecipe& out);
cudaError_t prepare_fused(Algorithm algorithm, const PeerSet& shape, ElementType type,
                          const KernelLayout& layout, std::int64_t rows, std::int64_t hidden,
                          LaunchRecipe& out);

// The call: the recipe's kernels with their arguments from `peers` (the
// current PeerSet) and `pointers`, enqueued on `stream` with the recipe's
// grid, block, cluster and attributes. No occupancy query, no dtype switch.
// Returns the first failing launch's status (the runtime's last-error
// state is cleared then; a second step is not launched after a failed
// first one), cudaErrorInvalidValue for a recipe that was never prepared,
// whose PeerSet::size differs from `peers.size` or whose call kernel
// (steps[0]) has more than kMaxCallBlocks blocks, else cudaSuccess.
cudaError_t launch(const LaunchRecipe& recipe, const PeerSet& peers, const CallPointers& pointers,
                   cudaStream_t stream);

// One line for the INFO log (the message itself is the plan's, printed
// next to it), e.g. "bf16 one-shot Lamport: 80 blocks x 512 threads, PDL"
// or, for 64 rows of 4096 at 2 ranks, "bf16 fused two-shot + row norm,
// shards of 131072: 32 blocks x 512 threads, PDL; then 512 blocks x 128
// threads in clusters of 8, PDL".
std::string describe(const LaunchRecipe& recipe);

}  // namespace peerplan::cuda_kernels
