// Launch shapes shared by the push and the pull kernels, and the dtype
// dispatch of their launchers. Every rank of a call computes the same grid
// from the same (rank-invariant) element count: per-block flags rely on
// block b of every rank handling the same part of the message.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "collective_kernels.hpp"

namespace peerplan::cuda_kernels {

inline constexpr int kThreads = 512;
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

inline unsigned blocks_for(std::int64_t work_items, int max_blocks) {
  const std::int64_t wanted = (work_items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<std::int64_t>(wanted, 1, max_blocks));
}

// Launches a P2P kernel of `blocks` x `threads`. With `overlap`
// (PeerSet::overlap_launch: Hopper and later), the launch is a
// programmatic dependent launch: the kernel may be scheduled while the
// previous kernel on the stream still runs, and waits for it on the device
// (begin_call) instead of on the launch path, hiding the launch latency.
// `cluster` > 1 groups consecutive blocks into thread-block clusters of
// that size (sm_90+; `blocks` must be a multiple of it).
template <class... Params, class... Args>
inline cudaError_t launch_p2p_clustered(void (*kernel)(Params...), unsigned blocks, int threads,
                                        unsigned cluster, bool overlap, cudaStream_t stream,
                                        Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.stream = stream;
  cudaLaunchAttribute attributes[2]{};
  unsigned count = 0;
  if (overlap) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  if (cluster > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = cluster;
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  config.attrs = attributes;
  config.numAttrs = count;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

template <class... Params, class... Args>
inline cudaError_t launch_p2p(void (*kernel)(Params...), unsigned blocks, int threads,
                              bool overlap, cudaStream_t stream, Args&&... args) {
  return launch_p2p_clustered(kernel, blocks, threads, 1, overlap, stream,
                              std::forward<Args>(args)...);
}

template <class F>
inline cudaError_t dispatch(ElementType type, F&& launch) {
  switch (type) {
    case ElementType::f16: launch(__half{}); break;
    case ElementType::bf16: launch(__nv_bfloat16{}); break;
    case ElementType::f32: launch(float{}); break;
  }
  return cudaGetLastError();
}

}  // namespace peerplan::cuda_kernels
