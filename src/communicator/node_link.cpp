// SPDX-License-Identifier: Apache-2.0
#include "communicator/node_link.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "communicator/card_decisions.hpp"
#include "communicator/machine_fingerprint.hpp"
#include "routing/fingerprint.hpp"

namespace peerplan::communicator {

routing::NodeLink node_link(const std::vector<RankCard>& cards, Backend backend) {
  if (backend != Backend::cuda || shared_gpus(cards).any()) return {};
  const std::vector<int> nodes = node_ids(cards);
  routing::NodeLink link;
  const int node_count = nodes.empty() ? 0 : *std::max_element(nodes.begin(), nodes.end()) + 1;
  for (int node = 0; node < node_count; ++node) {
    std::vector<std::size_t> ranks;
    for (std::size_t r = 0; r < cards.size(); ++r)
      if (nodes[r] == node) ranks.push_back(r);
    const auto placed = placed_gpus(cards, ranks);
    if (!placed) return {};
    const auto farthest = routing::farthest_link(placed->gpus, placed->nvlinks);
    if (!farthest || farthest->kind == topology::LinkKind::nv ||
        farthest->kind == topology::LinkKind::loc)
      continue;
    link.pcie = true;
    for (std::size_t r : ranks) {
      // NVML's capacity of the link; else hwloc's speed, which is the link's
      // current state (an idle GPU may have slowed it).
      const std::uint32_t speed = cards[r].gpu.pcie_max_mb_per_s > 0
                                      ? cards[r].gpu.pcie_max_mb_per_s
                                      : cards[r].gpu_location->pcie_mb_per_s;
      if (speed > 0 && (link.mb_per_s == 0 || speed < link.mb_per_s)) link.mb_per_s = speed;
    }
  }
  return link;
}

}  // namespace peerplan::communicator
