// SPDX-License-Identifier: Apache-2.0
// When a peer's flag (arrive, reduced, done of one block) says it reached
// this rank's call. A peer is at most one call ahead at a flag of a call
// this rank is in: it cannot finish a call whose barrier still waits for
// this rank. Below that, any value is a call not yet reached - however old:
// a block that flag-free protocols (LL, Lamport) never use keeps its flags
// from long ago, and a signed difference would take a flag 2^31 to 2^32 calls
// old for a later one and pass the barrier at once. kFlagLead bounds the
// lead with room to spare; a stale flag then passes only at a gap within it
// of a multiple of 2^32. Host and device, so that CI checks the rule.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace peerplan::cuda_kernels {

inline constexpr std::uint32_t kFlagLead = 16;

__host__ __device__ __forceinline__ bool flag_reached(std::uint32_t value, std::uint32_t target) {
  return value - target <= kFlagLead;  // unsigned: a value behind the target wraps high
}

}  // namespace peerplan::cuda_kernels
