// SPDX-License-Identifier: Apache-2.0
// Strided tensor <-> contiguous buffer (row-major logical order), for the
// MPI and NCCL fallbacks (launch_pack / launch_unpack).
#include <cstddef>
#include <cstdint>

#include "collective_kernels.hpp"
#include "element_ops.cuh"
#include "launch_shape.cuh"

namespace peerplan::cuda_kernels {
namespace {

template <class W>
__global__ void pack_kernel(const W* tensor, W* contiguous,
                            const __grid_constant__ KernelLayout layout, std::int64_t count,
                            bool unpack) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const std::int64_t offset = offset_of(layout, i);
    if (unpack)
      const_cast<W*>(tensor)[offset] = contiguous[i];
    else
      contiguous[i] = tensor[offset];
  }
}

}  // namespace

namespace {
cudaError_t launch_copy(std::size_t element_bytes, const void* tensor, void* contiguous,
                        const KernelLayout& layout, std::int64_t count, bool unpack,
                        cudaStream_t stream) {
  const unsigned blocks = blocks_for(count, 1024);
  if (element_bytes == 2) {
    pack_kernel<std::uint16_t><<<blocks, kThreads, 0, stream>>>(
        static_cast<const std::uint16_t*>(tensor), static_cast<std::uint16_t*>(contiguous), layout,
        count, unpack);
  } else {
    pack_kernel<std::uint32_t><<<blocks, kThreads, 0, stream>>>(
        static_cast<const std::uint32_t*>(tensor), static_cast<std::uint32_t*>(contiguous), layout,
        count, unpack);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_pack(std::size_t element_bytes, const void* tensor, void* contiguous,
                        const KernelLayout& layout, std::int64_t count, cudaStream_t stream) {
  return launch_copy(element_bytes, tensor, contiguous, layout, count, false, stream);
}

cudaError_t launch_unpack(std::size_t element_bytes, const void* contiguous, void* tensor,
                          const KernelLayout& layout, std::int64_t count, cudaStream_t stream) {
  return launch_copy(element_bytes, tensor, const_cast<void*>(contiguous), layout, count, true,
                     stream);
}

}  // namespace peerplan::cuda_kernels
