// The host launchers of collective_kernels.hpp that the transport calls on
// every call (launch_one_shot ... launch_fused_lamport), kept until it uses
// LaunchRecipes (launch_recipe.hpp): each is a recipe planned on the call's
// path - without prepare_*()'s checks, as before - and launched at once, so
// the launches are exactly the ones before recipes. launch_fused still
// chooses its protocol itself. No kernel here: this file goes as a whole.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "collective_kernels.hpp"
#include "launch_recipe.hpp"
#include "launch_shape.cuh"
#include "recipe_steps.cuh"

namespace peerplan::cuda_kernels {

cudaError_t launch_one_shot(const PeerSet& peers, ElementType type, const void* in, void* out,
                            const KernelLayout& layout, std::int64_t count,
                            cudaStream_t stream) {
  if (!with_element_type(type, [](auto) {})) return cudaGetLastError();
  LaunchRecipe recipe;
  detail::plan_all_reduce(Algorithm::one_shot_ll, peers, type, layout, count, recipe);
  CallPointers pointers;
  pointers.in = in;
  pointers.out = out;
  return detail::legacy_status(launch(recipe, peers, pointers, stream));
}

cudaError_t launch_two_shot(const PeerSet& peers, ElementType type, const void* in, void* out,
                            const KernelLayout& layout, std::int64_t count,
                            cudaStream_t stream) {
  if (!with_element_type(type, [](auto) {})) return cudaGetLastError();
  LaunchRecipe recipe;
  detail::plan_all_reduce(Algorithm::two_shot, peers, type, layout, count, recipe);
  CallPointers pointers;
  pointers.in = in;
  pointers.out = out;
  return detail::legacy_status(launch(recipe, peers, pointers, stream));
}

cudaError_t launch_pull_one_shot(const PeerSet& peers, ElementType type, const void* in,
                                 void* out, const KernelLayout& layout, std::int64_t count,
                                 PullSource source, cudaStream_t stream) {
  if (!with_element_type(type, [](auto) {})) return cudaGetLastError();
  LaunchRecipe recipe;
  detail::plan_all_reduce(Algorithm::pull_one_shot, peers, type, layout, count, recipe);
  CallPointers pointers;
  pointers.in = in;
  pointers.out = out;
  pointers.source = source;
  return detail::legacy_status(launch(recipe, peers, pointers, stream));
}

cudaError_t launch_pull_two_shot(const PeerSet& peers, ElementType type, const void* in,
                                 void* out, const KernelLayout& layout, std::int64_t count,
                                 PullSource source, cudaStream_t stream) {
  if (!with_element_type(type, [](auto) {})) return cudaGetLastError();
  LaunchRecipe recipe;
  detail::plan_all_reduce(Algorithm::pull_two_shot, peers, type, layout, count, recipe);
  CallPointers pointers;
  pointers.in = in;
  pointers.out = out;
  pointers.source = source;
  return detail::legacy_status(launch(recipe, peers, pointers, stream));
}

cudaError_t launch_one_shot_lamport(const PeerSet& peers, ElementType type, const void* in,
                                    void* out, const KernelLayout& layout, std::int64_t count,
                                    cudaStream_t stream) {
  if (!with_element_type(type, [](auto) {})) return cudaGetLastError();
  LaunchRecipe recipe;
  detail::plan_all_reduce(Algorithm::one_shot_lamport, peers, type, layout, count, recipe);
  CallPointers pointers;
  pointers.in = in;
  pointers.out = out;
  return detail::legacy_status(launch(recipe, peers, pointers, stream));
}

cudaError_t launch_fused(const PeerSet& peers, ElementType type, void* inout, void* residual,
                         const void* weight, float eps, const KernelLayout& layout,
                         std::int64_t rows, std::int64_t hidden, cudaStream_t stream) {
  if (!with_element_type(type, [](auto) {})) return cudaGetLastError();
  // Lamport: rows of whole packs (the region holds whole packs per row),
  // above the knob's threshold, within the region. Every input of the
  // choice is the same on every rank (the key fixes rows and hidden;
  // reserve() and the agreed knobs the rest), so sender and receiver run
  // the same protocol.
  const std::uint64_t row_bytes = static_cast<std::uint64_t>(hidden) * detail::element_bytes(type);
  const std::uint64_t bytes = row_bytes * static_cast<std::uint64_t>(rows);
  Algorithm algorithm;
  // (The kernel indexes the region's packs with 32-bit integers.)
  if (row_bytes % kPackBytes == 0 && bytes > peers.fused_lamport_after_bytes &&
      bytes <= peers.fused_lamport_max_bytes && bytes <= peers.lamport_max_bytes &&
      bytes / kPackBytes <= 0x7fffffffu) {
    algorithm = Algorithm::fused_lamport;
  } else if (row_bytes % kPackBytes == 0 && bytes <= peers.fused_ll_max_bytes) {
    // LL lines: a cluster per row where the device has clusters, else a block per row.
    algorithm = Algorithm::fused_ll;
  } else if (layout.dense) {
    // Larger messages: the two-shot all-reduce in place, then the
    // fallback's own add + RMSNorm kernel - the same sums (fixed rank
    // order, one rounding) and the same row function, so the same bits;
    // measured faster than one kernel that reduces and normalises rows
    // (benchmarks/RESULTS.md, session 3).
    algorithm = Algorithm::fused_two_shot_row_norm;
  } else {
    algorithm = Algorithm::fused_staged;
  }
  LaunchRecipe recipe;
  detail::plan_fused(algorithm, peers, type, layout, rows, hidden, recipe);
  CallPointers pointers;
  pointers.inout = inout;
  pointers.residual = residual;
  pointers.weight = weight;
  pointers.eps = eps;
  return detail::legacy_status(launch(recipe, peers, pointers, stream));
}

cudaError_t launch_fused_lamport(const PeerSet& peers, ElementType type, void* inout,
                                 void* residual, const void* weight, float eps,
                                 const KernelLayout& layout, std::int64_t rows,
                                 std::int64_t hidden, cudaStream_t stream) {
  if (!with_element_type(type, [](auto) {})) return cudaGetLastError();
  LaunchRecipe recipe;
  detail::plan_fused(Algorithm::fused_lamport, peers, type, layout, rows, hidden, recipe);
  CallPointers pointers;
  pointers.inout = inout;
  pointers.residual = residual;
  pointers.weight = weight;
  pointers.eps = eps;
  return detail::legacy_status(launch(recipe, peers, pointers, stream));
}

}  // namespace peerplan::cuda_kernels
