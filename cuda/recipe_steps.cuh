// SPDX-License-Identifier: Apache-2.0
// Internal to cuda/: the launch shape of each algorithm, defined next to its
// kernel (so every kernel stays in its own file's anonymous namespace: no
// device symbol crosses files, no relocatable device code), and the pieces
// launch_recipe.cu assembles into LaunchRecipes. Host functions only.
//
// A *_step() function fixes the instantiation for the dtype and the grid
// exactly as the launcher of its kernel always did; its kernel is null for
// a dtype outside ElementType. It checks nothing: prepare_*() validates
// first, then calls plan_*().
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "collective_kernels.hpp"
#include "launch_recipe.hpp"
#include "launch_shape.cuh"

namespace peerplan::cuda_kernels::detail {

// Push one-shot on LL lines: a line per thread up to shape.one_shot_max_blocks.
KernelStep one_shot_ll_step(const PeerSet& shape, ElementType type, std::int64_t count);
// Push one-shot, Lamport region: a pack per thread up to shape.one_shot_max_blocks.
KernelStep one_shot_lamport_step(const PeerSet& shape, ElementType type, std::int64_t count);
// Push two-shot: a thread per pack of a shard (`shard` elements,
// shard_elements()), at most kTwoShotMaxBlocks blocks.
KernelStep two_shot_step(const PeerSet& shape, ElementType type, std::int64_t shard);
// Push two-shot through the Lamport region: a thread per pack of a shard
// up to shape.one_shot_max_blocks (no per-block flags; two_shot_lamport.cu).
KernelStep two_shot_lamport_step(const PeerSet& shape, ElementType type, std::int64_t shard);
// The hierarchical route's two kernels (node_shards.cu): the same grid as
// the push two-shot.
KernelStep node_reduce_scatter_step(const PeerSet& shape, ElementType type, std::int64_t shard);
KernelStep node_all_gather_step(ElementType type, std::int64_t shard);
// Pull one-shot / two-shot: a thread per pack (of the message / of a shard),
// at most kAllReduceMaxBlocks blocks.
KernelStep pull_one_shot_step(const PeerSet& shape, ElementType type, std::int64_t count);
KernelStep pull_two_shot_step(const PeerSet& shape, ElementType type, std::int64_t shard);
// Two-shot by copy engines: the reduce kernel's grid, a thread per pack of
// a shard, at most kTwoShotMaxBlocks blocks (two_shot_dma.cu) ...
KernelStep two_shot_dma_step(ElementType type, std::int64_t shard);
// ... and the call: the copies out, the kernel (recipe.steps[0]) with its
// arguments, the copies back, on `stream`; a recipe of several pieces
// pipelines them over `streams` (null: refused). The first failing
// enqueue's status.
cudaError_t launch_two_shot_dma(const LaunchRecipe& recipe, const PeerSet& peers, const void* in,
                                void* out, const DmaStreams* streams, cudaStream_t stream);
// The pieces a copy-engine message of `message_bytes` runs as: one per
// kDmaPieceTargetBytes (launch_recipe.hpp), at least 1 and at most
// kMaxDmaPieces (messages under twice the target run whole).
int dma_pieces_for(std::size_t message_bytes);
// Fused op, Lamport: the variant for shape.cluster_rows and shape.size, as
// many rows at once as the device holds (occupancy query, cached per
// device and variant).
KernelStep fused_lamport_step(const PeerSet& shape, ElementType type, const KernelLayout& layout,
                              std::int64_t rows, std::int64_t hidden);
// fused_lamport_short.cu's kernel for the dtype, for exactly two ranks or any size
// and for 1 or 2 packs a thread (short_row_packs_per_thread): dense rows of at
// most kShortRowMaxPacks packs, aligned tensors.
const void* fused_lamport_short_kernel_for(ElementType type, bool two_ranks, int packs_per_thread);
// Fused op, LL lines: a cluster per row (shape.cluster_rows) or a block per row;
// dense rows of at most two packs per thread of the cluster run
// fused_ll_short.cu's kernel when the call's tensors are 16-byte aligned.
KernelStep fused_ll_step(const PeerSet& shape, ElementType type, const KernelLayout& layout,
                         std::int64_t rows, std::int64_t hidden);
// fused_ll_short.cu's kernel for the dtype, for exactly two ranks or any size
// and for 1 or 2 packs a thread.
const void* fused_ll_short_kernel_for(ElementType type, bool two_ranks, int packs_per_thread);
// Fused op, staged packs: a block per row, at most kMaxBlocks.
KernelStep fused_staged_step(const PeerSet& shape, ElementType type, std::int64_t rows);
// Fused op, two-shot by rows (fused_two_shot_rows.cu): a block of
// kRowThreads per row of a shard, at most kTwoShotMaxBlocks.
KernelStep fused_two_shot_rows_step(const PeerSet& shape, ElementType type, std::int64_t rows);
// The add + RMSNorm row kernel: units of a cluster (`clusters`) or a block
// each take rows unit, unit + units, ..., at most kMaxRowBlocks units;
// dense rows of at most two packs a thread stream through as many units as
// the device holds at once (row_norm.cu), when their tensors are aligned,
// in blocks once rows outnumber the resident clusters. A programmatic
// dependent launch when `clusters` is on.
KernelStep row_norm_step(ElementType type, const KernelLayout& layout, std::int64_t rows,
                         std::int64_t hidden, bool clusters);
// `step` as it runs these tensors: its unaligned_kernel when it has one and
// a tensor is not 16-byte aligned.
KernelStep for_tensors(KernelStep step, std::initializer_list<const void*> tensors);

// The launch shape most all-reduce kernels share: `threads` threads a block
// (kThreads unless said), a work item per thread, at most `max_blocks`
// blocks. `kernel_of(tag)` and `items_of(tag)` give, for a value `tag` of the
// dtype's element type, the kernel instantiated for it and its work items
// (lines, packs, packs of a shard). Its kernel is null for a dtype outside
// ElementType.
template <class KernelOf, class ItemsOf>
KernelStep grid_step(ElementType type, KernelOf&& kernel_of, ItemsOf&& items_of, int max_blocks,
                     bool programmatic, int threads = kThreads) {
  KernelStep step;
  with_element_type(type, [&](auto tag) {
    step.kernel = reinterpret_cast<const void*>(kernel_of(tag));
    step.blocks = blocks_for(items_of(tag), max_blocks, threads);
  });
  step.threads = static_cast<unsigned>(threads);
  step.programmatic = programmatic;
  return step;
}

// Bytes of an element of the dtype (f32 4, else 2).
std::size_t element_bytes(ElementType type) noexcept;

// The recipe for the message, without any check (launch_recipe.cu).
void plan_all_reduce(Algorithm algorithm, const PeerSet& shape, ElementType type,
                     const KernelLayout& layout, std::int64_t count, LaunchRecipe& out);
void plan_fused(Algorithm algorithm, const PeerSet& shape, ElementType type,
                const KernelLayout& layout, std::int64_t rows, std::int64_t hidden,
                LaunchRecipe& out);

// Enqueues one step with `args` (pointers to the kernel's arguments, in
// order): cudaLaunchKernelExC with the step's grid and block, a cluster
// dimension when step.cluster > 1 and the programmatic stream
// serialization attribute when step.programmatic (the kernel may then be
// scheduled while the previous kernel of the stream still runs and waits
// for it on the device: wait_for_previous_kernel in device_sync.cuh).
cudaError_t launch_step(const KernelStep& step, void** args, cudaStream_t stream);

}  // namespace peerplan::cuda_kernels::detail
