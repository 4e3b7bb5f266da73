// SPDX-License-Identifier: Apache-2.0
// The two flag words of an LL line (ll_lines.cuh): the call's epoch and its
// complement, not the epoch twice. The staged kernels leave raw data in the
// same slots, and data often repeats a value (zeros, ones): a stale line
// whose flag words held two equal data words would pass for a line of the
// call whose epoch has that value (epoch 0 after the 2^32 wrap, 0x3F800000
// for f32 ones). A line with two equal flag words never passes.
// Host and device, so that CI checks the rule without a GPU.
#pragma once

#include <vector_types.h>

#include <cstdint>

namespace peerplan::cuda_kernels {

// 8 data bytes and the flags of call `epoch`, as one 16-byte line.
__host__ __device__ __forceinline__ uint4 make_line(uint2 data, std::uint32_t epoch) {
  return uint4{data.x, epoch, data.y, ~epoch};
}

// Whether `line` (as loaded) carries the data of call `epoch`.
__host__ __device__ __forceinline__ bool carries(const uint4& line, std::uint32_t epoch) {
  return line.y == epoch && line.w == ~epoch;
}

}  // namespace peerplan::cuda_kernels
