// SPDX-License-Identifier: Apache-2.0
#include "communicator/node_link.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "communicator/card_decisions.hpp"
#include "routing/fingerprint.hpp"
#include "topology/nvlink_counts.hpp"
#include "topology/pci_address.hpp"

namespace peerplan::communicator {

routing::NodeLink node_link(const std::vector<RankCard>& cards, Backend backend) {
  if (backend != Backend::cuda || shared_gpus(cards).any()) return {};
  for (const RankCard& card : cards)
    if (!card.gpu_location) return {};
  const std::vector<int> nodes = node_ids(cards);
  routing::NodeLink link;
  const int node_count = nodes.empty() ? 0 : *std::max_element(nodes.begin(), nodes.end()) + 1;
  for (int node = 0; node < node_count; ++node) {
    std::vector<topology::GpuLocation> gpus;
    std::vector<topology::PciAddress> addresses;
    std::vector<topology::NvlinkEnds> ends;
    std::uint32_t slowest = 0;  // MB/s; 0: no GPU of the node gives one
    for (std::size_t r = 0; r < cards.size(); ++r) {
      if (nodes[r] != node) continue;
      const topology::GpuLocation& gpu = *cards[r].gpu_location;
      gpus.push_back(gpu);
      addresses.push_back(gpu.address);
      ends.push_back(cards[r].gpu.nvlinks);
      // NVML's capacity of the link; else hwloc's speed, which is the link's
      // current state (an idle GPU may have slowed it).
      const std::uint32_t speed =
          cards[r].gpu.pcie_max_mb_per_s > 0 ? cards[r].gpu.pcie_max_mb_per_s : gpu.pcie_mb_per_s;
      if (speed > 0 && (slowest == 0 || speed < slowest)) slowest = speed;
    }
    const auto farthest = routing::farthest_link(gpus, topology::count_nvlinks(addresses, ends));
    if (!farthest || farthest->kind == topology::LinkKind::nv ||
        farthest->kind == topology::LinkKind::loc)
      continue;
    link.pcie = true;
    if (slowest > 0 && (link.mb_per_s == 0 || slowest < link.mb_per_s)) link.mb_per_s = slowest;
  }
  return link;
}

}  // namespace peerplan::communicator
