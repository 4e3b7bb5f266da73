// SPDX-License-Identifier: Apache-2.0
#include "communicator/machine_fingerprint.hpp"

#include <optional>
#include <vector>

#include "communicator/card_decisions.hpp"
#include "communicator/rank_gpu.hpp"
#include "routing/fingerprint.hpp"
#include "topology/nvlink_counts.hpp"

namespace peerplan::communicator {

std::optional<PlacedGpus> placed_gpus(const std::vector<RankCard>& cards,
                                      const std::vector<std::size_t>& ranks) {
  PlacedGpus placed;
  std::vector<topology::PciAddress> addresses;
  std::vector<topology::NvlinkEnds> ends;
  for (std::size_t r : ranks) {
    if (!cards[r].gpu_location) return std::nullopt;
    placed.gpus.push_back(*cards[r].gpu_location);
    addresses.push_back(cards[r].gpu_location->address);
    ends.push_back(cards[r].gpu.nvlinks);
  }
  placed.nvlinks = topology::count_nvlinks(addresses, ends);
  return placed;
}

std::string machine_fingerprint(const std::vector<RankCard>& cards, int num_nodes,
                                Backend backend) {
  routing::MachineFacts facts;
  facts.backend = backend;
  facts.world_size = static_cast<int>(cards.size());
  facts.num_nodes = num_nodes;
  // Ranks sharing a GPU of one machine, on any number of nodes: no tuning
  // entry applies to such a job (concepts.md).
  facts.gpus_shared = backend == Backend::cuda && shared_gpus(cards).any();
  if (backend == Backend::cuda && facts.num_nodes == 1) {
    for (const RankCard& card : cards)
      facts.gpu_names.push_back(card.gpu.name.empty() ? "unknown" : card.gpu.name);
    std::vector<std::size_t> every_rank(cards.size());
    for (std::size_t r = 0; r < cards.size(); ++r) every_rank[r] = r;
    // Every rank's GPU, or none (the links read as unknown).
    if (auto placed = placed_gpus(cards, every_rank)) {
      facts.gpus = std::move(placed->gpus);
      facts.nvlinks = std::move(placed->nvlinks);
    }
  }
  return routing::topology_fingerprint(facts);
}

}  // namespace peerplan::communicator
