// SPDX-License-Identifier: Apache-2.0
// The eager launch floor beside a benchmark's calls: one empty kernel
// launched on the caller's stream as shared/bench/limits.cu launches its own
// (one block of 32 threads), so a call's host time can be set against the
// launch it cannot do without, in the same run and the same processes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace peerplan::bench {

cudaError_t launch_empty_kernel(cudaStream_t stream);

// The library's way of launching (cuda/launch_recipe.cu's launch_step),
// with nothing to do: cudaLaunchKernelExC, a grid of `cluster` blocks of 32
// threads, a parameter block of kLaunchParamBytes when `large_params`
// (about what the P2P kernels take: the peer set, the layout, the tensors),
// programmatic stream serialization when `programmatic`, and a cluster
// dimension when `cluster` > 1. What each costs the calling thread is what
// it adds to an eager call over the floor.
inline constexpr std::size_t kLaunchParamBytes = 512;
cudaError_t launch_empty_kernel_ex(cudaStream_t stream, bool large_params, bool programmatic,
                                   unsigned cluster);

}  // namespace peerplan::bench
