// SPDX-License-Identifier: Apache-2.0
// Launch recipes (launch_recipe.hpp): the checks of prepare_*(), the
// assembly of an algorithm's steps (each algorithm's file computes its own
// launch shape: recipe_steps.cuh), the call's argument lists and launches,
// and the INFO line.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "element_ops.cuh"
#include "launch_recipe.hpp"
#include "launch_shape.cuh"
#include "recipe_steps.cuh"
#include "shard_geometry.cuh"

namespace peerplan::cuda_kernels {
namespace {

bool known(ElementType type) {
  return type == ElementType::f16 || type == ElementType::bf16 || type == ElementType::f32;
}

bool fused(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::fused_lamport:
    case Algorithm::fused_ll:
    case Algorithm::fused_staged:
    case Algorithm::fused_two_shot_row_norm:
    case Algorithm::fused_two_shot_lamport_row_norm:
    case Algorithm::fused_two_shot_dma_row_norm:
    case Algorithm::fused_two_shot_rows:
    case Algorithm::node_all_gather_row_norm:
      return true;
    default:
      return false;
  }
}

bool all_reduce(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::one_shot_ll:
    case Algorithm::one_shot_lamport:
    case Algorithm::two_shot:
    case Algorithm::pull_one_shot:
    case Algorithm::pull_two_shot:
    case Algorithm::node_reduce_scatter:
    case Algorithm::node_all_gather:
    case Algorithm::two_shot_dma:
    case Algorithm::two_shot_lamport:
      return true;
    default:
      return false;
  }
}

// Elements per shard of a two-shot message (shard_geometry.cuh).
std::int64_t shard_of(ElementType type, std::int64_t count, int ranks) {
  std::int64_t shard = 0;
  with_element_type(type, [&](auto tag) {
    using T = decltype(tag);
    shard = shard_elements<static_cast<int>(kPackBytes / sizeof(T))>(count, ranks);
  });
  return shard;
}

// A Lamport two-shot of `count` elements fits the region: the message is
// within its limit and both halves of a sub-slot (two shards) fit one
// sub-slot. (Its kernel indexes packs with 64-bit integers.)
bool lamport_two_shot_fits(const PeerSet& shape, ElementType type, std::int64_t count) {
  const std::uint64_t element = detail::element_bytes(type);
  const std::uint64_t shard = static_cast<std::uint64_t>(shard_of(type, count, shape.size));
  return static_cast<std::uint64_t>(count) * element <= shape.lamport_max_bytes &&
         2 * shard * element <= shape.lamport_sub_slot_bytes;
}

// A copy-engine two-shot of `count` elements: its pieces, the first
// piece's shards and the reduce kernel's grid for them.
void plan_dma(LaunchRecipe& r, ElementType type, std::int64_t count, int ranks) {
  r.pieces = detail::dma_pieces_for(static_cast<std::size_t>(count) * detail::element_bytes(type));
  // Pieces are cut like shards (shard_geometry.cuh): whole packs, the last
  // one shorter.
  const int pack = static_cast<int>(kPackBytes / detail::element_bytes(type));
  r.piece_elements = shard_elements_of(count, r.pieces, pack);
  r.shard_elements = shard_of(type, r.piece_elements, ranks);
  r.steps[0] = detail::two_shot_dma_step(type, r.shard_elements);
}

// A copy-engine two-shot of `count` elements fits the region: the message
// is within its limit, and every piece's shard (at the piece's offset in
// each area) fits an area.
bool dma_fits(const PeerSet& shape, ElementType type, std::int64_t count) {
  LaunchRecipe r;
  plan_dma(r, type, count, shape.size);
  const std::uint64_t element = detail::element_bytes(type);
  return static_cast<std::uint64_t>(count) * element <= shape.dma_max_bytes &&
         static_cast<std::uint64_t>(r.pieces) * static_cast<std::uint64_t>(r.shard_elements) *
                 element <=
             shape.dma_area_bytes;
}

// The one-shot grid cap (PeerSet::one_shot_max_blocks) is one the kernels
// without per-block flags can launch.
bool one_shot_grid_valid(const PeerSet& shape) {
  return shape.one_shot_max_blocks >= 1 && shape.one_shot_max_blocks <= kMaxOneShotBlocks;
}

void start(LaunchRecipe& r, Algorithm algorithm, const PeerSet& shape, ElementType type,
           const KernelLayout& layout, std::int64_t count) {
  r = LaunchRecipe{};
  r.algorithm = algorithm;
  r.type = type;
  r.layout = layout;
  r.ranks = shape.size;
  r.count = count;
  r.message_bytes = static_cast<std::size_t>(count) * detail::element_bytes(type);
  r.step_count = 1;
}

// The runtime's last error is cleared after a failed launch, so that it is
// not reported again by an unrelated later check.
cudaError_t failed(cudaError_t status) {
  if (status != cudaSuccess) cudaGetLastError();
  return status;
}

}  // namespace

namespace detail {

std::size_t element_bytes(ElementType type) noexcept { return type == ElementType::f32 ? 4u : 2u; }

void plan_all_reduce(Algorithm algorithm, const PeerSet& shape, ElementType type,
                     const KernelLayout& layout, std::int64_t count, LaunchRecipe& r) {
  start(r, algorithm, shape, type, layout, count);
  switch (algorithm) {
    case Algorithm::one_shot_ll:
      r.steps[0] = one_shot_ll_step(shape, type, count);
      break;
    case Algorithm::one_shot_lamport:
      r.steps[0] = one_shot_lamport_step(shape, type, count);
      break;
    case Algorithm::two_shot:
      r.shard_elements = shard_of(type, count, shape.size);
      r.steps[0] = two_shot_step(shape, type, r.shard_elements);
      break;
    case Algorithm::pull_one_shot:
      r.steps[0] = pull_one_shot_step(shape, type, count);
      break;
    case Algorithm::pull_two_shot:
      r.shard_elements = shard_of(type, count, shape.size);
      r.steps[0] = pull_two_shot_step(shape, type, r.shard_elements);
      break;
    case Algorithm::node_reduce_scatter:
      r.shard_elements = shard_of(type, count, shape.size);
      r.steps[0] = node_reduce_scatter_step(shape, type, r.shard_elements);
      break;
    case Algorithm::node_all_gather:
      r.shard_elements = shard_of(type, count, shape.size);
      r.steps[0] = node_all_gather_step(type, r.shard_elements);
      break;
    case Algorithm::two_shot_dma:
      plan_dma(r, type, count, shape.size);
      break;
    case Algorithm::two_shot_lamport:
      r.shard_elements = shard_of(type, count, shape.size);
      r.steps[0] = two_shot_lamport_step(shape, type, r.shard_elements);
      break;
    default:
      r.step_count = 0;
      break;
  }
}

void plan_fused(Algorithm algorithm, const PeerSet& shape, ElementType type,
                const KernelLayout& layout, std::int64_t rows, std::int64_t hidden,
                LaunchRecipe& r) {
  start(r, algorithm, shape, type, layout, rows * hidden);
  r.rows = rows;
  r.hidden = hidden;
  switch (algorithm) {
    case Algorithm::fused_lamport:
      r.steps[0] = fused_lamport_step(shape, type, layout, rows, hidden);
      break;
    case Algorithm::fused_ll:
      r.steps[0] = fused_ll_step(shape, type, layout, rows, hidden);
      break;
    case Algorithm::fused_staged:
      r.steps[0] = fused_staged_step(shape, type, rows);
      break;
    case Algorithm::fused_two_shot_rows:
      r.steps[0] = fused_two_shot_rows_step(shape, type, rows);
      break;
    case Algorithm::fused_two_shot_row_norm:
    case Algorithm::fused_two_shot_lamport_row_norm:
    case Algorithm::fused_two_shot_dma_row_norm:
      // The two-shot all-reduce of the whole message in place, then the
      // fallback's own add + RMSNorm kernel on the reduced rows: the same
      // sums (fixed rank order, one rounding) and the same row function as
      // the other fused kernels, so the same bits, whichever protocol
      // the two-shot runs on.
      if (algorithm == Algorithm::fused_two_shot_dma_row_norm) {
        plan_dma(r, type, r.count, shape.size);
      } else {
        r.shard_elements = shard_of(type, r.count, shape.size);
        r.steps[0] = algorithm == Algorithm::fused_two_shot_lamport_row_norm
                         ? two_shot_lamport_step(shape, type, r.shard_elements)
                         : two_shot_step(shape, type, r.shard_elements);
      }
      r.steps[1] = row_norm_step(type, layout, rows, hidden, shape.cluster_rows);
      r.step_count = 2;
      break;
    case Algorithm::node_all_gather_row_norm:
      // The hierarchical all-gather into a dense buffer, then the same row
      // kernel from it: any layout of inout and residual.
      r.shard_elements = shard_of(type, r.count, shape.size);
      r.steps[0] = node_all_gather_step(type, r.shard_elements);
      r.steps[1] = row_norm_step(type, layout, rows, hidden, shape.cluster_rows);
      r.step_count = 2;
      break;
    default:
      r.step_count = 0;
      break;
  }
}

cudaError_t launch_step(const KernelStep& step, void** args, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(step.blocks);
  config.blockDim = dim3(step.threads);
  config.stream = stream;
  cudaLaunchAttribute attributes[2]{};
  unsigned count = 0;
  if (step.programmatic) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  if (step.cluster > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = step.cluster;
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  config.attrs = attributes;
  config.numAttrs = count;
  return cudaLaunchKernelExC(&config, step.kernel, args);
}

}  // namespace detail

const char* to_string(Algorithm algorithm) noexcept {
  switch (algorithm) {
    case Algorithm::one_shot_ll:
      return "one-shot LL";
    case Algorithm::one_shot_lamport:
      return "one-shot Lamport";
    case Algorithm::two_shot:
      return "two-shot";
    case Algorithm::pull_one_shot:
      return "pull one-shot";
    case Algorithm::pull_two_shot:
      return "pull two-shot";
    case Algorithm::fused_lamport:
      return "fused Lamport";
    case Algorithm::fused_ll:
      return "fused LL";
    case Algorithm::fused_staged:
      return "fused staged";
    case Algorithm::fused_two_shot_row_norm:
      return "fused two-shot + row norm";
    case Algorithm::node_reduce_scatter:
      return "node reduce-scatter";
    case Algorithm::node_all_gather:
      return "node all-gather";
    case Algorithm::node_all_gather_row_norm:
      return "node all-gather + row norm";
    case Algorithm::two_shot_dma:
      return "two-shot by copy engines";
    case Algorithm::two_shot_lamport:
      return "two-shot Lamport";
    case Algorithm::fused_two_shot_lamport_row_norm:
      return "fused two-shot Lamport + row norm";
    case Algorithm::fused_two_shot_dma_row_norm:
      return "fused two-shot by copy engines + row norm";
    case Algorithm::fused_two_shot_rows:
      return "fused two-shot by rows";
  }
  return "unknown";
}

cudaError_t prepare_all_reduce(Algorithm algorithm, const PeerSet& shape, ElementType type,
                               const KernelLayout& layout, std::int64_t count, LaunchRecipe& out) {
  if (!all_reduce(algorithm) || !known(type) || count <= 0 || shape.size < 1 ||
      shape.size > kMaxRanks) {
    return cudaErrorInvalidValue;
  }
  const bool one_shot_grid = algorithm == Algorithm::one_shot_ll ||
                             algorithm == Algorithm::one_shot_lamport ||
                             algorithm == Algorithm::two_shot_lamport;
  if (one_shot_grid && !one_shot_grid_valid(shape)) return cudaErrorInvalidValue;
  const std::uint64_t bytes = static_cast<std::uint64_t>(count) * detail::element_bytes(type);
  if (algorithm == Algorithm::one_shot_lamport && bytes > shape.lamport_max_bytes) {
    return cudaErrorInvalidValue;
  }
  if (algorithm == Algorithm::two_shot_lamport && !lamport_two_shot_fits(shape, type, count)) {
    return cudaErrorInvalidValue;
  }
  // The copies move contiguous bytes; the region holds dma_max_bytes.
  if (algorithm == Algorithm::two_shot_dma && (!layout.dense || !dma_fits(shape, type, count))) {
    return cudaErrorInvalidValue;
  }
  detail::plan_all_reduce(algorithm, shape, type, layout, count, out);
  return cudaSuccess;
}

cudaError_t prepare_fused(Algorithm algorithm, const PeerSet& shape, ElementType type,
                          const KernelLayout& layout, std::int64_t rows, std::int64_t hidden,
                          LaunchRecipe& out) {
  if (!fused(algorithm) || !known(type) || rows <= 0 || hidden <= 0 || shape.size < 1 ||
      shape.size > kMaxRanks || rows > std::numeric_limits<std::int64_t>::max() / hidden) {
    return cudaErrorInvalidValue;
  }
  const std::uint64_t row_bytes = static_cast<std::uint64_t>(hidden) * detail::element_bytes(type);
  const std::uint64_t bytes = row_bytes * static_cast<std::uint64_t>(rows);
  const bool whole_packs = row_bytes % kPackBytes == 0;
  switch (algorithm) {
    case Algorithm::fused_lamport:
      // The region holds whole packs per row; the kernel indexes its packs
      // (rows * packs per row) with 32-bit integers.
      if (!whole_packs || bytes > shape.lamport_max_bytes || bytes / kPackBytes > 0x7fffffffu) {
        return cudaErrorInvalidValue;
      }
      break;
    case Algorithm::fused_ll:
      if (!whole_packs) return cudaErrorInvalidValue;  // a pack of a row is two whole lines
      break;
    case Algorithm::fused_two_shot_row_norm:
      if (!layout.dense) return cudaErrorInvalidValue;  // the two-shot reduces in place
      break;
    case Algorithm::fused_two_shot_lamport_row_norm:
      if (!layout.dense || !lamport_two_shot_fits(shape, type, rows * hidden) ||
          !one_shot_grid_valid(shape)) {
        return cudaErrorInvalidValue;
      }
      break;
    case Algorithm::fused_two_shot_dma_row_norm:
      if (!layout.dense || !dma_fits(shape, type, rows * hidden)) return cudaErrorInvalidValue;
      break;
    case Algorithm::fused_two_shot_rows:
      if (!layout.dense || !fused_two_shot_rows_fits(type, hidden)) return cudaErrorInvalidValue;
      break;
    default:
      break;
  }
  detail::plan_fused(algorithm, shape, type, layout, rows, hidden, out);
  return cudaSuccess;
}

cudaError_t launch(const LaunchRecipe& recipe, const PeerSet& peers, const CallPointers& pointers,
                   cudaStream_t stream) {
  // steps[0] is every algorithm's call kernel (begin_call), whose blocks
  // each read the epoch from a word of their own: no recipe makes a larger
  // grid, and none may.
  if (recipe.step_count < 1 || recipe.step_count > 2 || recipe.steps[0].kernel == nullptr ||
      recipe.steps[0].blocks > static_cast<unsigned>(kMaxCallBlocks) ||
      (recipe.step_count == 2 && recipe.steps[1].kernel == nullptr) || recipe.ranks != peers.size) {
    return cudaErrorInvalidValue;
  }
  // The kernels' parameters, in order; a typed pointer parameter is passed
  // as the untyped pointer of the same value.
  void* const peer_set = const_cast<PeerSet*>(&peers);
  void* const layout = const_cast<KernelLayout*>(&recipe.layout);
  void* const count = const_cast<std::int64_t*>(&recipe.count);
  void* const rows = const_cast<std::int64_t*>(&recipe.rows);
  void* const hidden = const_cast<std::int64_t*>(&recipe.hidden);
  switch (recipe.algorithm) {
    case Algorithm::one_shot_ll:
    case Algorithm::one_shot_lamport:
    case Algorithm::two_shot:
    case Algorithm::two_shot_lamport:
    case Algorithm::node_reduce_scatter:
    case Algorithm::node_all_gather: {
      // (PeerSet, const T* in, T* out, KernelLayout, count)
      const void* in = pointers.in;
      void* out = pointers.out;
      void* args[] = {peer_set, &in, &out, layout, count};
      return failed(detail::launch_step(recipe.steps[0], args, stream));
    }
    case Algorithm::two_shot_dma:
      return failed(detail::launch_two_shot_dma(recipe, peers, pointers.in, pointers.out,
                                                pointers.dma, stream));
    case Algorithm::pull_one_shot:
    case Algorithm::pull_two_shot: {
      // (PeerSet, const T* in, T* out, KernelLayout, count, PullSource)
      const void* in = pointers.in;
      void* out = pointers.out;
      PullSource source = pointers.source;
      void* args[] = {peer_set, &in, &out, layout, count, &source};
      return failed(detail::launch_step(recipe.steps[0], args, stream));
    }
    case Algorithm::fused_lamport:
    case Algorithm::fused_ll:
    case Algorithm::fused_staged:
    case Algorithm::fused_two_shot_rows: {
      // (PeerSet, T* inout, T* residual, const T* weight, eps, KernelLayout, rows, hidden)
      void* inout = pointers.inout;
      void* residual = pointers.residual;
      const void* weight = pointers.weight;
      float eps = pointers.eps;
      void* args[] = {peer_set, &inout, &residual, &weight, &eps, layout, rows, hidden};
      return failed(detail::launch_step(
          detail::for_tensors(recipe.steps[0], {inout, residual, weight}), args, stream));
    }
    case Algorithm::fused_two_shot_row_norm:
    case Algorithm::fused_two_shot_lamport_row_norm:
    case Algorithm::fused_two_shot_dma_row_norm: {
      // The two-shot all-reduce in place: (PeerSet, const T* in, T* out,
      // KernelLayout, count), or the copies and the kernel by copy engines.
      const void* in = pointers.inout;
      void* out = pointers.inout;
      void* reduce[] = {peer_set, &in, &out, layout, count};
      const cudaError_t status =
          recipe.algorithm == Algorithm::fused_two_shot_dma_row_norm
              ? detail::launch_two_shot_dma(recipe, peers, in, out, pointers.dma, stream)
              : detail::launch_step(recipe.steps[0], reduce, stream);
      if (status != cudaSuccess) return failed(status);
      // Then (const T* reduced, T* inout, T* residual, const T* weight,
      // eps, KernelLayout, rows, hidden, const uint32_t* aborted): after a
      // two-shot that gave up, this rank's "aborted" word (Signals) tells
      // the row kernel to write nothing.
      void* residual = pointers.residual;
      const void* weight = pointers.weight;
      float eps = pointers.eps;
      const auto* aborted = reinterpret_cast<const std::uint32_t*>(
          static_cast<const char*>(peers.slabs[peers.rank]) + offsetof(Signals, aborted));
      void* norm[] = {&in, &out, &residual, &weight, &eps, layout, rows, hidden, &aborted};
      return failed(detail::launch_step(
          detail::for_tensors(recipe.steps[1], {in, out, residual, weight}), norm, stream));
    }
    case Algorithm::node_all_gather_row_norm: {
      // The all-gather into the dense buffer: (PeerSet, const T* node
      // shard, T* out, KernelLayout (dense), count) ...
      const void* node_shard = pointers.in;
      void* reduced = pointers.out;
      KernelLayout dense{};
      void* gather[] = {peer_set, &node_shard, &reduced, &dense, count};
      const cudaError_t status = detail::launch_step(recipe.steps[0], gather, stream);
      if (status != cudaSuccess) return failed(status);
      // ... then the row kernel from it, as in fused_two_shot_row_norm.
      const void* sums = reduced;
      void* inout = pointers.inout;
      void* residual = pointers.residual;
      const void* weight = pointers.weight;
      float eps = pointers.eps;
      const auto* aborted = reinterpret_cast<const std::uint32_t*>(
          static_cast<const char*>(peers.slabs[peers.rank]) + offsetof(Signals, aborted));
      void* norm[] = {&sums, &inout, &residual, &weight, &eps, layout, rows, hidden, &aborted};
      return failed(detail::launch_step(
          detail::for_tensors(recipe.steps[1], {sums, inout, residual, weight}), norm, stream));
    }
  }
  return cudaErrorInvalidValue;
}

namespace {

const char* type_name(ElementType type) {
  switch (type) {
    case ElementType::f16:
      return "f16";
    case ElementType::bf16:
      return "bf16";
    case ElementType::f32:
      return "f32";
  }
  return "?";
}

std::string step_text(const KernelStep& step) {
  std::string text = std::to_string(step.blocks) + (step.blocks == 1 ? " block x " : " blocks x ") +
                     std::to_string(step.threads) + " threads";
  if (step.cluster > 1) text += " in clusters of " + std::to_string(step.cluster);
  if (step.programmatic) text += ", PDL";
  return text;
}

}  // namespace

std::string describe(const LaunchRecipe& recipe) {
  std::string text = std::string(type_name(recipe.type)) + " " + to_string(recipe.algorithm);
  if (recipe.pieces > 1) text += " in " + std::to_string(recipe.pieces) + " pipelined pieces";
  if (recipe.shard_elements > 0) text += ", shards of " + std::to_string(recipe.shard_elements);
  if (recipe.step_count < 1) return text + ": not prepared";
  if (recipe.algorithm == Algorithm::two_shot_dma ||
      recipe.algorithm == Algorithm::fused_two_shot_dma_row_norm) {
    const std::string copies =
        std::to_string(recipe.ranks - 1) + (recipe.ranks == 2 ? " copy" : " copies");
    text += ": " + copies + " out, " + step_text(recipe.steps[0]) + ", " + copies + " back";
  } else {
    text += ": " + step_text(recipe.steps[0]);
  }
  if (recipe.step_count > 1) text += "; then " + step_text(recipe.steps[1]);
  return text;
}

}  // namespace peerplan::cuda_kernels
