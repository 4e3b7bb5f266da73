// SPDX-License-Identifier: Apache-2.0
// The word a rank that gives up writes into each peer's abandoned[] (0 there
// means "no give-up"), and the late-rank check begin_call (device_sync.cuh)
// makes of it: a rank fails a call that a peer gave up on, or one after.
// Host and device, so that CI checks the rule across the 2^32 wrap.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace peerplan::cuda_kernels {

// A give-up at call `epoch`. Epoch 0 (after 2^32 - 1) is marked as 2^32 - 1,
// the call before it, which also makes a rank at epoch 0 fail it. A rank
// still to begin call 2^32 - 1 cannot see that mark: the peer finished
// that call before it gave up at 0, and finishing it took every rank's
// data of it, which a kernel writes only after its start.
__host__ __device__ __forceinline__ std::uint32_t gave_up_mark(std::uint32_t epoch) {
  return epoch == 0u ? 0xFFFFFFFFu : epoch;
}

// Whether a rank starting call `call` must fail it, given a peer's
// abandoned[] word `mark` (epochs compared by signed difference: they wrap).
__host__ __device__ __forceinline__ bool late_for_mark(std::uint32_t call, std::uint32_t mark) {
  return mark != 0u && static_cast<std::int32_t>(call - mark) >= 0;
}

// The call a peer gave up on, from its mark as a rank found it at the start
// of call `call` (late_for_mark true): the mark, but for the mark of epoch 0,
// which found at call 1 means 0 (a give-up at 2^32 - 1 would have failed
// this rank's call 0 at its start). Found at call 0 it may mean either call:
// 2^32 - 1 is returned, and the caller says both (ambiguous_wrap_mark).
__host__ __device__ __forceinline__ std::uint32_t call_given_up(std::uint32_t call,
                                                                std::uint32_t mark) {
  return mark == 0xFFFFFFFFu && call == 1u ? 0u : mark;
}

// Whether that mark, found at that call, names call 0 or the one before it
// alike.
__host__ __device__ __forceinline__ bool ambiguous_wrap_mark(std::uint32_t call,
                                                             std::uint32_t mark) {
  return mark == 0xFFFFFFFFu && call == 0u;
}

}  // namespace peerplan::cuda_kernels
