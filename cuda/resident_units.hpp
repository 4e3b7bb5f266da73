// SPDX-License-Identifier: Apache-2.0
// How many launch units of a row kernel the current device holds at once,
// for kernels that take rows unit, unit + units, ... (the Lamport fused
// op, the add + RMSNorm row kernel): more units than that would only queue.
#pragma once

#include <atomic>
#include <cstdint>

namespace peerplan::cuda_kernels::detail {

inline constexpr int kResidentCacheDevices = 64;
// One per kernel: the answer per device, 0 until known.
using ResidentCache = std::atomic<int>[kResidentCacheDevices];

// Units of `kernel` resident at once on the current device: clusters of
// kRowSplits blocks of kSplitThreads (`cluster`), else blocks of
// kRowThreads; at most `most`, and `most` when the occupancy calculator
// fails. Cached in `cache` (static storage, so zero-initialised): the
// calculator is asked once per device.
std::int64_t resident_row_units(const void* kernel, bool cluster, std::int64_t most,
                                ResidentCache& cache);

}  // namespace peerplan::cuda_kernels::detail
