// SPDX-License-Identifier: Apache-2.0
// NVLink counts between GPUs, from what each GPU reports about the far ends
// of its own links (NVML on GPU hosts; hwloc cannot see NVLink). Plain
// data in, plain data out, so it is computed identically on every rank
// from gathered reports and tested without GPUs.
#pragma once

#include <vector>

#include "topology/link_class.hpp"
#include "topology/pci_address.hpp"

namespace peerplan::topology {

// The far ends of one GPU's active NVLinks.
struct NvlinkEnds {
  std::vector<PciAddress> gpu_peers;  // one entry per link that ends at a GPU
  int switch_links = 0;               // links that end at an NVSwitch

  friend bool operator==(const NvlinkEnds&, const NvlinkEnds&) = default;
};

// counts[i][j]: NVLinks between gpus[i] and gpus[j], as `nvidia-smi topo -m`
// shows them: links of either GPU that end at the other (the larger of the
// two sides' counts, which agree when both are known), plus, when both
// reach NVSwitches, the smaller of their switch link counts (over a switch
// fabric every link carries traffic to every GPU on it). 0 on the
// diagonal. `ends` is indexed like `gpus`; throws InvalidArgument when the
// sizes differ.
NvlinkCounts count_nvlinks(const std::vector<PciAddress>& gpus,
                           const std::vector<NvlinkEnds>& ends);

}  // namespace peerplan::topology
