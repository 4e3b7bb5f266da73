// SPDX-License-Identifier: Apache-2.0
#include "transport/cuda/ipc_handles.hpp"

#include <cuda.h>

#include "transport/cuda/cuda_check.hpp"

namespace peerplan::transport::cuda {
namespace {

using GetAddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

// Through the driver entry point: linking libcuda directly would make the
// library fail to load on machines without a driver.
GetAddressRange address_range_query() {
  static const GetAddressRange query = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      fn = nullptr;
    }
    return reinterpret_cast<GetAddressRange>(fn);
  }();
  return query;
}

}  // namespace

AllocationRange allocation_of(const void* ptr) {
  AllocationRange range{const_cast<void*>(ptr), 0};
  const GetAddressRange query = address_range_query();
  if (query == nullptr) return range;
  CUdeviceptr base = 0;
  size_t size = 0;
  if (query(&base, &size, reinterpret_cast<CUdeviceptr>(ptr)) != CUDA_SUCCESS) return range;
  return AllocationRange{reinterpret_cast<void*>(base), size};
}

ExportedBuffer export_buffer(void* ptr, std::size_t bytes) {
  ExportedBuffer e{};
  void* base = allocation_of(ptr).base;
  check_cuda(cudaIpcGetMemHandle(&e.handle, base), "cudaIpcGetMemHandle");
  e.offset = static_cast<std::uint64_t>(static_cast<char*>(ptr) - static_cast<char*>(base));
  e.bytes = bytes;
  e.ok = 1;
  return e;
}

}  // namespace peerplan::transport::cuda
