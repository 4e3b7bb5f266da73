// SPDX-License-Identifier: Apache-2.0
#include "communicator/machine_fingerprint.hpp"

#include <optional>
#include <vector>

#include "communicator/card_decisions.hpp"
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
  // Ranks sharing a GPU of one machine, on any number of nodes: no tuning
  // entry applies to such a job (concepts.md).
  facts.gpus_shared = backend == Backend::cuda && shared_gpus(cards).any();
  if (backend == Backend::cuda && facts.num_nodes == 1) {
    for (const RankCard& card : cards)
      facts.gpu_names.push_back(card.gpu.name.empty() ? "unknown" : card.gpu.name);
    locate(cards, facts);
  }
  return routing::topology_fingerprint(facts);
}

}  // namespace peerplan::communicator
