// CUDA and NCCL status codes to peerplan errors.
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>
#include <nccl.h>

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

inline void check_nccl(ncclResult_t status, const std::string& what) {
  if (status != ncclSuccess && status != ncclInProgress) {
    throw NcclError("peerplan cuda backend: " + what + " failed: " + ncclGetErrorString(status) +
                    ". Set NCCL_DEBUG=WARN for NCCL's own explanation.");
  }
}

}  // namespace peerplan::transport::cuda
