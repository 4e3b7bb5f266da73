// SPDX-License-Identifier: Apache-2.0
// Launch shapes shared by the kernels' *_step() functions (recipe_steps.cuh;
// the launches themselves are detail::launch_step's, launch_recipe.cu) and
// their dtype dispatch. Every rank of a call computes the same grid from
// the same (rank-invariant) element count: per-block flags rely on block b
// of every rank handling the same part of the message.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "collective_kernels.hpp"

namespace peerplan::cuda_kernels {

inline constexpr int kThreads = 512;
// The LL one-shot's blocks are smaller: a message of 4-64 KiB then spreads
// over twice as many SMs, each pushing and summing half the lines.
inline constexpr int kOneShotLlThreads = 256;
// The Lamport one-shot's blocks while the grid cap holds the message at a
// pack per thread (up to 528 KiB of bf16 at 132 blocks): as small, for the
// same reason. Larger messages keep kThreads: the capped grid would give
// each thread twice the packs.
inline constexpr int kOneShotLamportSmallThreads = 256;
// Row kernels (fused op, add + RMSNorm): one block per row, so short rows
// are latency-bound; more threads shorten each thread's chain. The fused
// and the fallback kernel must use the same count: it fixes the order of
// the deterministic block sum, hence their bit-identical results.
inline constexpr int kRowThreads = 1024;
// A row is handled in kRowSplits parts of kSplitThreads threads each (one
// block of kRowThreads, or a cluster of kRowSplits blocks): rms_norm_row.cuh.
inline constexpr int kRowSplits = 8;
inline constexpr int kSplitThreads = kRowThreads / kRowSplits;
static_assert(kSplitThreads % 32 == 0 && kRowSplits <= 8, "whole warps; a portable cluster");
inline constexpr int kAllReduceMaxBlocks = 80;
static_assert(kAllReduceMaxBlocks <= kMaxBlocks);
// The push two-shot kernel: as many blocks as there are per-block flags.
inline constexpr int kTwoShotMaxBlocks = kMaxBlocks;

inline unsigned blocks_for(std::int64_t work_items, int max_blocks, int threads = kThreads) {
  const std::int64_t wanted = (work_items + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<std::int64_t>(wanted, 1, max_blocks));
}

// Calls f with a value of the dtype's element type; false (f not called)
// for a value outside ElementType. No CUDA call.
template <class F>
inline bool with_element_type(ElementType type, F&& f) {
  switch (type) {
    case ElementType::f16:
      f(__half{});
      return true;
    case ElementType::bf16:
      f(__nv_bfloat16{});
      return true;
    case ElementType::f32:
      f(float{});
      return true;
  }
  return false;
}

template <class F>
inline cudaError_t dispatch(ElementType type, F&& launch) {
  switch (type) {
    case ElementType::f16:
      launch(__half{});
      break;
    case ElementType::bf16:
      launch(__nv_bfloat16{});
      break;
    case ElementType::f32:
      launch(float{});
      break;
  }
  return cudaGetLastError();
}

}  // namespace peerplan::cuda_kernels
