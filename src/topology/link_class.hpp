// SPDX-License-Identifier: Apache-2.0
// The link between two GPUs in the vocabulary of `nvidia-smi topo -m`, and
// the P2P eligibility policy built on it (PEERPLAN_P2P_LEVEL, like
// NCCL_P2P_LEVEL).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "peerplan/config.hpp"
#include "topology/gpu_location.hpp"

namespace peerplan::topology {

// Ordered from closest to farthest, in step with P2PLevel.
enum class LinkKind : std::uint8_t {
  loc = 0,   // the same GPU ("X" in nvidia-smi's matrix)
  nv = 1,    // NVLink (count in LinkClass::nvlinks)
  pix = 2,   // through at most one PCIe switch (both GPUs below the same switch)
  pxb = 3,   // through several PCIe switches, not through the host bridge
  phb = 4,   // through a PCIe host bridge (same root complex)
  node = 5,  // across PCIe host bridges within one NUMA node
  sys = 6,   // across NUMA nodes (SMP interconnect: UPI, Infinity Fabric, ...)
};

struct LinkClass {
  LinkKind kind = LinkKind::sys;
  int nvlinks = 0;  // number of NVLinks when kind == nv, else 0
  friend bool operator==(const LinkClass&, const LinkClass&) = default;
};

// "X", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS".
std::string to_string(LinkClass link);
const char* to_string(LinkKind kind) noexcept;

// The class of the path between two GPUs. hwloc cannot see NVLink: pass the
// number of NVLinks between them (from NVML/CUDA on GPU hosts); when it is
// > 0 the link is NV# whatever the PCIe path. Throws InvalidArgument when
// nvlinks < 0.
LinkClass classify(const GpuLocation& a, const GpuLocation& b, int nvlinks = 0);

// The level P2PLevel::automatic stands for (NODE); any other level itself.
P2PLevel effective_p2p_level(P2PLevel level) noexcept;

// Whether P2P may be used over `link` at `level`: P2P is used when the link
// is at most as far as the level (PIX at level PXB: yes; PHB at level PXB:
// no). NVLink is allowed at every level except LOC, which allows no peer
// link at all (only the same GPU). P2PLevel::automatic acts as
// effective_p2p_level(automatic).
bool p2p_allowed(LinkClass link, P2PLevel level) noexcept;

// The closest level that allows `link` (NV# -> NVL, PIX -> PIX, X -> LOC).
P2PLevel level_needed_for(LinkClass link) noexcept;

// nvlinks[i][j]: NVLinks between gpus[i] and gpus[j]; empty = none known.
using NvlinkCounts = std::vector<std::vector<int>>;

// A matrix like `nvidia-smi topo -m` for logs: one row and column per GPU,
// then each GPU's CPU and NUMA affinity and PCI bus id, then a legend; a
// one-line note when there is no GPU.
// Throws InvalidArgument if nvlinks is not empty and not gpus.size() square.
std::string link_matrix(const std::vector<GpuLocation>& gpus, const NvlinkCounts& nvlinks = {});

}  // namespace peerplan::topology
