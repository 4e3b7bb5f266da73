// SPDX-License-Identifier: Apache-2.0
// One rank's GPU as its rank card carries it (the machine fingerprint, the
// P2P level check, the defaults' link): where it sits on PCI, its model,
// where its NVLinks lead and its PCIe link's capacity. Plain values, no
// CUDA types.
#pragma once

#include <cstdint>
#include <string>

#include "topology/nvlink_counts.hpp"

namespace peerplan::communicator {

struct RankGpu {
  std::string bus_id;  // PCI bus id in any spelling PciAddress::parse takes; empty if unknown
  std::string name;    // model, e.g. "NVIDIA H200"
  topology::NvlinkEnds nvlinks;
  // Its PCIe link's capacity from NVML, MB/s per direction; 0 unknown (the
  // topology's current speed, GpuLocation::pcie_mb_per_s, stands in).
  std::uint32_t pcie_max_mb_per_s = 0;
  friend bool operator==(const RankGpu&, const RankGpu&) = default;
};

}  // namespace peerplan::communicator
