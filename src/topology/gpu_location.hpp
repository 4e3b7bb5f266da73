// SPDX-License-Identifier: Apache-2.0
// Where a GPU sits in the machine: its PCI address, the PCIe bridges between
// it and its host bridge, and the NUMA node / package that host bridge is
// attached to. Plain data (no hwloc types), so locations can be compared,
// logged, or sent between ranks, and link classes computed from them alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/pci_address.hpp"

namespace peerplan::topology {

// The part a PCI-to-PCI bridge plays in the PCIe tree. A PCIe switch shows up
// as one upstream-port bridge with one downstream-port bridge per slot below
// it; a root port is the bridge of the root complex that a slot hangs off.
enum class PciPortRole : std::uint8_t {
  root_port = 0,
  switch_upstream = 1,
  switch_downstream = 2,
};

const char* to_string(PciPortRole role) noexcept;

struct PciBridge {
  PciAddress address;
  std::uint16_t vendor_id = 0;
  std::uint16_t device_id = 0;
  PciPortRole role = PciPortRole::root_port;
};

struct GpuLocation {
  PciAddress address;
  std::uint16_t vendor_id = 0;
  std::uint16_t device_id = 0;
  std::uint16_t class_id = 0;  // 0x0300 VGA, 0x0302 3D controller, ...
  // PCI bridges from the GPU upwards, nearest first, up to but excluding the
  // host bridge (e.g. switch downstream port, switch upstream port, root port).
  std::vector<PciBridge> bridges;
  // The host bridge (root complex) above the GPU, named by its PCI domain and
  // bus range as hwloc prints it: "0000:[40-5f]". Empty if hwloc put none above.
  std::string host_bridge;
  int numa_node = -1;      // OS index of the NUMA node local to the GPU; -1 if unknown or several
  int package = -1;        // physical package (socket) local to the GPU; -1 if unknown or several
  std::string local_cpus;  // CPUs local to the GPU, list format ("0-15,32-47")
  // The GPU's own PCIe link, MB/s per direction as hwloc gives it (31508 for
  // PCIe 4.0 x16): the link's current state, which an idle GPU may have
  // slowed; 0 when unknown. Over PCIe the CUDA defaults scale with it where
  // NVML gives no capacity (RankGpu::pcie_max_mb_per_s).
  std::uint32_t pcie_mb_per_s = 0;

  std::string bus_id() const { return address.to_string(); }
  // Upstream ports of the PCIe switches above the GPU, nearest first: one
  // entry per switch crossed on the way to the root port.
  std::vector<PciAddress> switches() const;
};

}  // namespace peerplan::topology
