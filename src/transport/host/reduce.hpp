// SPDX-License-Identifier: Apache-2.0
// The reduction step shared by the P2P algorithms: element-wise sum of the
// staging buffers of all ranks in fp32, always in the fixed source order
// 0..n-1 and rounded once, so that every rank computes bit-identical
// results from the same inputs.
#pragma once

#include <cstdint>

#include "peerplan/dtype.hpp"

namespace peerplan::transport::host {

// dst[i] = round(sum_{r=0..n-1} sources[r][first + i]) for i in [0, count);
// sources are contiguous arrays of `dtype`, dst receives `count` elements.
void reduce_sources(DataType dtype, const void* const* sources, int n, std::int64_t first,
                    std::int64_t count, void* dst);

// The fp32 sums, not rounded: a partial sum that more terms will join (the
// hierarchical route's node sum, before the other nodes' are added).
void sum_sources_to_float(DataType dtype, const void* const* sources, int n, std::int64_t first,
                          std::int64_t count, float* dst);

// Same sums, rounded to `dtype` but handed back as floats (for the fused op).
void reduce_sources_to_float(DataType dtype, const void* const* sources, int n, std::int64_t first,
                             std::int64_t count, float* dst);

}  // namespace peerplan::transport::host
