// SPDX-License-Identifier: Apache-2.0
#include "communicator/machine_fingerprint.hpp"

#include <optional>
#include <vector>

#include "communicator/rank_gpu.hpp"
#include "routing/fingerprint.hpp"
#include "topology/nvlink_counts.hpp"

namespace peerplan::communicator {
namespace {

// Every rank's GPU as its own topology placed it (its card), or nothing
// when one is missing.
void locate(const std::vector<RankCard>& cards, routing::MachineFacts& facts) {
  std::vector<topology::GpuLocation> gpus;
  std::vector<topology::PciAddress> addresses;
  std::vector<topology::NvlinkEnds> ends;
  for (const RankCard& card : cards) {
    if (!card.gpu_location) return;  // links unknown
    gpus.push_back(*card.gpu_location);
    addresses.push_back(card.gpu_location->address);
    ends.push_back(card.gpu.nvlinks);
  }
  facts.gpus = std::move(gpus);
  facts.nvlinks = topology::count_nvlinks(addresses, ends);
}

}  // namespace

std::string machine_fingerprint(const std::vector<RankCard>& cards, int num_nodes,
                                Backend backend) {
  routing::MachineFacts facts;
  facts.backend = backend;
  facts.world_size = static_cast<int>(cards.size());
  facts.num_nodes = num_nodes;
  if (backend == Backend::cuda && facts.num_nodes == 1) {
    std::vector<RankGpu> ranks;
    for (const RankCard& card : cards) ranks.push_back(card.gpu);
    for (const RankGpu& rank : ranks)
      facts.gpu_names.push_back(rank.name.empty() ? "unknown" : rank.name);
    for (std::size_t i = 0; i < ranks.size(); ++i)
      for (std::size_t j = i + 1; j < ranks.size(); ++j)
        if (!ranks[i].bus_id.empty() && ranks[i].bus_id == ranks[j].bus_id)
          facts.gpus_shared = true;
    locate(cards, facts);
  }
  return routing::topology_fingerprint(facts);
}

}  // namespace peerplan::communicator
