// SPDX-License-Identifier: Apache-2.0
#include "transport/cuda/gpu_identity.hpp"

#include <cuda_runtime_api.h>

#include "transport/cuda/cuda_check.hpp"

namespace peerplan::transport::cuda {

GpuIdentity current_gpu_identity() {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  char bus_id[64] = {};
  check_cuda(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device), "cudaDeviceGetPCIBusId");
  GpuIdentity identity{bus_id, properties.name, {}};
  const NvmlLinks links = query_nvml_links(identity.pci_bus_id);
  identity.nvlinks = links.nvlinks;
  identity.pcie_max_mb_per_s = links.pcie_max_mb_per_s;
  return identity;
}

}  // namespace peerplan::transport::cuda
