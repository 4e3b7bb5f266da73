// SPDX-License-Identifier: Apache-2.0
// How a call's epoch follows the last one (begin_call, device_sync.cuh):
// by one, except that no call has epoch 0, which abandoned[] keeps for
// "none" (a peer that gave up records the epoch itself). After 2^32 - 1
// comes 2, not 1, so that consecutive calls still alternate slots (e % 2).
// Host and device, so that CI checks the rule.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace peerplan::cuda_kernels {

// What the call after the one with epoch `last` adds to it.
__host__ __device__ __forceinline__ std::uint32_t epoch_step(std::uint32_t last) {
  return last + 1u == 0u ? 3u : 1u;
}

}  // namespace peerplan::cuda_kernels
