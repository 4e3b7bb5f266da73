// SPDX-License-Identifier: Apache-2.0
#include "topology/link_class.hpp"

#include <algorithm>
#include <sstream>

#include "peerplan/errors.hpp"

namespace peerplan::topology {
namespace {

// The points of the PCIe tree a GPU's traffic crosses on its way up, nearest
// first, one per switch: a downstream port stands for the switch whose
// upstream port is right above it, so the two bridges of a switch count once
// (counting raw bridges would make two GPUs on one switch look like PXB).
// Root ports are kept: two functions behind one root port meet there.
std::vector<PciAddress> crossing_points(const GpuLocation& gpu) {
  std::vector<PciAddress> points;
  const auto& bridges = gpu.bridges;
  for (std::size_t i = 0; i < bridges.size(); ++i) {
    const bool folds_into_next = bridges[i].role == PciPortRole::switch_downstream &&
                                 i + 1 < bridges.size() &&
                                 bridges[i + 1].role == PciPortRole::switch_upstream;
    if (!folds_into_next) points.push_back(bridges[i].address);
  }
  return points;
}

LinkClass pcie_class(const GpuLocation& a, const GpuLocation& b) {
  if (a.host_bridge.empty() || a.host_bridge != b.host_bridge) {
    // Different root complexes: the traffic crosses the CPU-side fabric,
    // within one NUMA node of one socket (NODE) or farther (SYS). The socket
    // counts too: one NUMA node can span two (AMD NPS0, node interleaving,
    // numa=off). An unknown NUMA node or socket is treated as the far case.
    const bool same_numa = a.numa_node >= 0 && a.numa_node == b.numa_node;
    const bool same_package = a.package >= 0 && a.package == b.package;
    return {same_numa && same_package ? LinkKind::node : LinkKind::sys, 0};
  }
  const auto up_a = crossing_points(a);
  const auto up_b = crossing_points(b);
  // The first of a's crossing points (nearest first) that b also crosses is
  // where the two paths meet below the host bridge.
  for (std::size_t i = 0; i < up_a.size(); ++i) {
    const auto j = std::find(up_b.begin(), up_b.end(), up_a[i]);
    if (j != up_b.end()) {
      const bool one_switch = i == 0 && j == up_b.begin();
      return {one_switch ? LinkKind::pix : LinkKind::pxb, 0};
    }
  }
  return {LinkKind::phb, 0};
}

// Position of each class on the P2PLevel scale (both go closest to farthest).
int distance_rank(LinkKind kind) noexcept {
  switch (kind) {
    case LinkKind::loc:
      return static_cast<int>(P2PLevel::loc);
    case LinkKind::nv:
      return static_cast<int>(P2PLevel::nvl);
    case LinkKind::pix:
      return static_cast<int>(P2PLevel::pix);
    case LinkKind::pxb:
      return static_cast<int>(P2PLevel::pxb);
    case LinkKind::phb:
      return static_cast<int>(P2PLevel::phb);
    case LinkKind::node:
      return static_cast<int>(P2PLevel::node);
    case LinkKind::sys:
      return static_cast<int>(P2PLevel::sys);
  }
  return static_cast<int>(P2PLevel::sys) + 1;  // unknown: never allowed
}

std::string pad(const std::string& text, std::size_t width) {
  return text.size() >= width ? text + ' ' : text + std::string(width - text.size(), ' ');
}

}  // namespace

const char* to_string(PciPortRole role) noexcept {
  switch (role) {
    case PciPortRole::root_port:
      return "root port";
    case PciPortRole::switch_upstream:
      return "switch upstream port";
    case PciPortRole::switch_downstream:
      return "switch downstream port";
  }
  return "?";
}

std::vector<PciAddress> GpuLocation::switches() const {
  std::vector<PciAddress> upstream_ports;
  for (const auto& bridge : bridges)
    if (bridge.role == PciPortRole::switch_upstream) upstream_ports.push_back(bridge.address);
  return upstream_ports;
}

const char* to_string(LinkKind kind) noexcept {
  switch (kind) {
    case LinkKind::loc:
      return "X";
    case LinkKind::nv:
      return "NV";
    case LinkKind::pix:
      return "PIX";
    case LinkKind::pxb:
      return "PXB";
    case LinkKind::phb:
      return "PHB";
    case LinkKind::node:
      return "NODE";
    case LinkKind::sys:
      return "SYS";
  }
  return "?";
}

std::string to_string(LinkClass link) {
  if (link.kind == LinkKind::nv) return "NV" + std::to_string(link.nvlinks);
  return to_string(link.kind);
}

LinkClass classify(const GpuLocation& a, const GpuLocation& b, int nvlinks) {
  if (nvlinks < 0)
    throw InvalidArgument("NVLink count between GPUs " + a.bus_id() + " and " + b.bus_id() +
                          " is " + std::to_string(nvlinks) + "; pass 0 when they share no NVLink");
  if (a.address == b.address) return {LinkKind::loc, 0};
  if (nvlinks > 0) return {LinkKind::nv, nvlinks};
  return pcie_class(a, b);
}

// NODE rather than NCCL's default (PXB, or SYS on AMD CPUs with at most two
// GPUs): peerplan's kernels are for small, latency-bound messages, which
// cross a host bridge well and which its fallback (NCCL, over host memory
// when P2P is off) serves no better; the real peer copy of the CUDA backend
// catches a root complex that does not forward P2P at all. Across the CPU
// interconnect (SYS) P2P is unsupported or slow on many machines, and NCCL
// leaves it off there too unless told otherwise. docs/configuration.md has the details.
P2PLevel effective_p2p_level(P2PLevel level) noexcept {
  return level == P2PLevel::automatic ? P2PLevel::node : level;
}

bool p2p_allowed(LinkClass link, P2PLevel level) noexcept {
  return distance_rank(link.kind) <= static_cast<int>(effective_p2p_level(level));
}

P2PLevel level_needed_for(LinkClass link) noexcept {
  const int rank = distance_rank(link.kind);
  return rank > static_cast<int>(P2PLevel::sys) ? P2PLevel::sys : static_cast<P2PLevel>(rank);
}

std::string link_matrix(const std::vector<GpuLocation>& gpus, const NvlinkCounts& nvlinks) {
  const std::size_t n = gpus.size();
  if (!nvlinks.empty()) {
    bool square = nvlinks.size() == n;
    for (const auto& row : nvlinks) square = square && row.size() == n;
    if (!square)
      throw InvalidArgument("NVLink counts must be a " + std::to_string(n) + "x" +
                            std::to_string(n) + " matrix (one row and column per GPU) or empty");
  }
  if (n == 0) return "No GPUs found (no NVIDIA, AMD or Intel display/3D controller on PCI).\n";
  constexpr std::size_t cell = 8;
  std::size_t cpu_width = std::string("CPU Affinity").size() + 2;
  for (const auto& gpu : gpus) cpu_width = std::max(cpu_width, gpu.local_cpus.size() + 2);

  std::ostringstream out;
  out << pad("", cell);
  for (std::size_t j = 0; j < n; ++j) out << pad("GPU" + std::to_string(j), cell);
  out << pad("CPU Affinity", cpu_width) << pad("NUMA Affinity", 15) << "PCI Bus\n";
  for (std::size_t i = 0; i < n; ++i) {
    out << pad("GPU" + std::to_string(i), cell);
    for (std::size_t j = 0; j < n; ++j) {
      const int links = nvlinks.empty() ? 0 : nvlinks[i][j];
      out << pad(to_string(classify(gpus[i], gpus[j], links)), cell);
    }
    const auto& gpu = gpus[i];
    out << pad(gpu.local_cpus.empty() ? "N/A" : gpu.local_cpus, cpu_width)
        << pad(gpu.numa_node < 0 ? "N/A" : std::to_string(gpu.numa_node), 15) << gpu.bus_id()
        << '\n';
  }
  out << "\nLegend:\n"
         "  X    = the same GPU\n"
         "  SYS  = PCIe plus the interconnect between NUMA nodes or sockets (UPI, Infinity "
         "Fabric, ...)\n"
         "  NODE = PCIe plus the path between host bridges inside one NUMA node of one socket\n"
         "  PHB  = PCIe through a host bridge (the CPU's root complex)\n"
         "  PXB  = PCIe through several switches, not through a host bridge\n"
         "  PIX  = PCIe through at most one switch\n"
         "  NV#  = # bonded NVLinks\n";
  return out.str();
}

}  // namespace peerplan::topology
