// SPDX-License-Identifier: Apache-2.0
// Whether a stream is being captured into a CUDA graph: the fallbacks ask
// before doing what a capture cannot hold (growing a buffer, running MPI).
#pragma once

#include <cuda_runtime_api.h>

namespace peerplan::transport::cuda {

// False when CUDA cannot tell (the error is cleared): the caller then
// proceeds as for an uncaptured stream, and CUDA reports any misuse.
inline bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace peerplan::transport::cuda
