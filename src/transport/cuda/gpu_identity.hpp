// SPDX-License-Identifier: Apache-2.0
// What the topology fingerprint and the defaults need to know about this
// rank's GPU (routing/fingerprint.hpp, communicator/node_link.hpp): its
// model, where it sits on PCI, where its NVLinks lead and what its PCIe link
// carries. No CUDA types, so the communicator can include it.
#pragma once

#include <cstdint>
#include <string>

#include "topology/nvlink_counts.hpp"

namespace peerplan::transport::cuda {

struct GpuIdentity {
  std::string pci_bus_id;  // as cudaDeviceGetPCIBusId prints it
  std::string name;        // cudaDeviceProp::name, e.g. "NVIDIA H200"
  topology::NvlinkEnds nvlinks;
  std::uint32_t pcie_max_mb_per_s = 0;  // NvmlLinks::pcie_max_mb_per_s
};

// The current device's identity (select_device has run). Throws CudaError
// if the runtime cannot describe the device; NVLinks are left empty when
// NVML is not available (the links then read as the PCIe class).
GpuIdentity current_gpu_identity();

struct NvmlLinks {
  topology::NvlinkEnds nvlinks;  // where the GPU's NVLinks end
  // Its PCIe link's capacity, MB/s per direction (the generation and width
  // the GPU and its slot support, whatever the link runs at now); 0 unknown.
  std::uint32_t pcie_max_mb_per_s = 0;
};

// What NVML says of the links of the GPU at `pci_bus_id` (NVML is loaded at
// run time: libnvidia-ml ships with the driver, not with the toolkit, and
// a missing one must not stop the library from loading). Empty when NVML
// or the GPU cannot be queried; never throws.
NvmlLinks query_nvml_links(const std::string& pci_bus_id) noexcept;

}  // namespace peerplan::transport::cuda
