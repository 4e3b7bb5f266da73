// SPDX-License-Identifier: Apache-2.0
// The eager launch floor beside a benchmark's calls: one empty kernel
// launched on the caller's stream as shared/bench/limits.cu launches its own
// (one block of 32 threads), so a call's host time can be set against the
// launch it cannot do without, in the same run and the same processes.
#pragma once

#include <cuda_runtime_api.h>

namespace peerplan::bench {

cudaError_t launch_empty_kernel(cudaStream_t stream);

}  // namespace peerplan::bench
