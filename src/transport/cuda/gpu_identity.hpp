// SPDX-License-Identifier: Apache-2.0
// What the topology fingerprint needs to know about this rank's GPU
// (routing/fingerprint.hpp): its model, where it sits on PCI, and where
// its NVLinks lead. No CUDA types, so the communicator can include it.
#pragma once

#include <string>

#include "topology/nvlink_counts.hpp"

namespace peerplan::transport::cuda {

struct GpuIdentity {
  std::string pci_bus_id;  // as cudaDeviceGetPCIBusId prints it
  std::string name;        // cudaDeviceProp::name, e.g. "NVIDIA H200"
  topology::NvlinkEnds nvlinks;
};

// The current device's identity (select_device has run). Throws CudaError
// if the runtime cannot describe the device; NVLinks are left empty when
// NVML is not available (the links then read as the PCIe class).
GpuIdentity current_gpu_identity();

// Where the NVLinks of the GPU at `pci_bus_id` end, from NVML (loaded at
// run time: libnvidia-ml ships with the driver, not with the toolkit, and
// a missing one must not stop the library from loading). Empty when NVML
// or the GPU cannot be queried; never throws.
topology::NvlinkEnds query_nvlink_ends(const std::string& pci_bus_id) noexcept;

}  // namespace peerplan::transport::cuda
