// SPDX-License-Identifier: Apache-2.0
// NCCL status codes to peerplan errors. Apart from cuda_check.hpp because it
// needs <nccl.h>: include it only from code built with NCCL
// (PEERPLAN_HAVE_NCCL, src/transport/cuda/CMakeLists.txt).
#pragma once

#include <nccl.h>

#include <string>

#include "peerplan/errors.hpp"

namespace peerplan::transport::cuda {

inline void check_nccl(ncclResult_t status, const std::string& what) {
  if (status != ncclSuccess && status != ncclInProgress) {
    throw NcclError("peerplan cuda backend: " + what + " failed: " + ncclGetErrorString(status) +
                    ". Set NCCL_DEBUG=WARN for NCCL's own explanation.");
  }
}

}  // namespace peerplan::transport::cuda
