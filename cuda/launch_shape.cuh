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
inline constexpr int kAllReduceMaxBlocks = 80;
static_assert(kAllReduceMaxBlocks <= kMaxBlocks);

inline unsigned blocks_for(std::int64_t work_items, int max_blocks) {
  const std::int64_t wanted = (work_items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<std::int64_t>(wanted, 1, max_blocks));
}

// Launches a P2P kernel of `blocks` x `threads`. With `overlap`
// (PeerSet::overlap_launch: Hopper and later), the launch is a
// programmatic dependent launch: the kernel may be scheduled while the
// previous kernel on the stream still runs, and waits for it on the device
// (begin_call) instead of on the launch path, hiding the launch latency.
template <class... Params, class... Args>
inline cudaError_t launch_p2p(void (*kernel)(Params...), unsigned blocks, int threads,
                              bool overlap, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = overlap ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
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
