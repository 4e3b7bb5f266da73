// SPDX-License-Identifier: Apache-2.0
// CUDA status codes to peerplan errors. NCCL's are in nccl_check.hpp, which
// needs <nccl.h> (builds with NCCL only).
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>

#include <string>

#include "peerplan/errors.hpp"

namespace peerplan::transport::cuda {

inline void check_cuda(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) {
    throw CudaError("peerplan cuda backend: " + what + " failed: " + cudaGetErrorName(status) +
                    " (" + cudaGetErrorString(status) +
                    "). Run with PEERPLAN_DEBUG=INFO and CUDA_LAUNCH_BLOCKING=1 to locate it.");
  }
}

}  // namespace peerplan::transport::cuda
