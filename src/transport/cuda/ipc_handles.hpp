// SPDX-License-Identifier: Apache-2.0
// Exporting a device buffer through CUDA IPC: the handle is taken of the
// buffer's allocation base (cudaIpcGetMemHandle refuses interior pointers)
// and the buffer's offset from that base travels with it, so buffers
// sub-allocated by caching allocators (PyTorch's) can be shared.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace peerplan::transport::cuda {

// Trivially copyable: sent as bytes through the bootstrap.
struct ExportedBuffer {
  cudaIpcMemHandle_t handle;
  std::uint64_t offset;  // of the buffer from its allocation's base
  std::uint64_t bytes;
  std::int32_t ok;
  std::int32_t pad;
};

// The allocation holding `ptr`: base and size (through the driver entry
// point; the runtime has no equivalent). Falls back to {ptr, 0} when the
// driver cannot say.
struct AllocationRange {
  void* base = nullptr;
  std::size_t bytes = 0;
};
AllocationRange allocation_of(const void* ptr);

// Throws CudaError (naming what failed) when the buffer cannot be exported.
ExportedBuffer export_buffer(void* ptr, std::size_t bytes);

}  // namespace peerplan::transport::cuda
