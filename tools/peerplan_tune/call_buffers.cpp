// SPDX-License-Identifier: Apache-2.0
#include "call_buffers.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#if PEERPLAN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace peerplan::tune {

CallBuffer::CallBuffer(Backend backend, std::size_t bytes) : backend_(backend) {
  const std::size_t rounded = (bytes + 63) / 64 * 64;  // 16-byte packs; whole cache lines
#if PEERPLAN_HAVE_CUDA
  if (backend == Backend::cuda) {
    if (cudaMalloc(&data_, rounded) != cudaSuccess || cudaMemset(data_, 0, rounded) != cudaSuccess)
      throw std::runtime_error("cannot allocate " + std::to_string(rounded) +
                               " bytes of GPU memory; lower -e");
    return;
  }
#endif
  data_ = std::aligned_alloc(64, rounded);
  if (data_ == nullptr) throw std::bad_alloc();
  std::memset(data_, 0, rounded);
}

CallBuffer::~CallBuffer() {
#if PEERPLAN_HAVE_CUDA
  if (backend_ == Backend::cuda) {
    cudaFree(data_);
    return;
  }
#endif
  std::free(data_);
}

}  // namespace peerplan::tune
