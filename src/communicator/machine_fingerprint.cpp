// SPDX-License-Identifier: Apache-2.0
#include "communicator/machine_fingerprint.hpp"

#include <optional>
#include <span>
#include <vector>

#include "communicator/rank_gpu.hpp"
#include "peerplan/errors.hpp"
#include "routing/fingerprint.hpp"
#include "topology/nvlink_counts.hpp"
#include "topology/topology.hpp"

namespace peerplan::communicator {
namespace {

// Every rank's GPU as the topology places it, or nothing when one is missing.
void locate(const std::vector<RankGpu>& ranks, const Config& config, routing::MachineFacts& facts) {
  std::vector<topology::GpuLocation> gpus;
  std::vector<topology::PciAddress> addresses;
  std::vector<topology::NvlinkEnds> ends;
  try {
    const auto topology = topology::Topology::shared(config.topology_file);
    for (const RankGpu& rank : ranks) {
      const auto location = rank.bus_id.empty() ? std::nullopt : topology->find_gpu(rank.bus_id);
      if (!location) return;
      gpus.push_back(*location);
      addresses.push_back(location->address);
      ends.push_back(rank.nvlinks);
    }
  } catch (const Error&) {
    return;  // no topology: links unknown
  }
  facts.gpus = std::move(gpus);
  facts.nvlinks = topology::count_nvlinks(addresses, ends);
}

}  // namespace

std::string machine_fingerprint(const std::vector<RankCard>& cards, int num_nodes,
                                const Config& config, Backend backend) {
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
    locate(ranks, config, facts);
  }
  return routing::topology_fingerprint(facts);
}

}  // namespace peerplan::communicator
