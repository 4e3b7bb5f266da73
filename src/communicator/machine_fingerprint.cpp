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
#if PEERPLAN_HAVE_CUDA
#include "transport/cuda/gpu_identity.hpp"
#endif

namespace peerplan::communicator {
namespace {

RankGpu this_rank_gpu() {
  RankGpu gpu{"", "unknown", {}};
#if PEERPLAN_HAVE_CUDA
  try {
    auto identity = transport::cuda::current_gpu_identity();
    gpu = {identity.pci_bus_id, identity.name, identity.nvlinks};
  } catch (const Error&) {
    // The fingerprint then says "unknown"; the backend itself reports real failures.
  }
#endif
  return gpu;
}

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

std::string machine_fingerprint(bootstrap::Bootstrap& bootstrap, const Config& config,
                                Backend backend) {
  routing::MachineFacts facts;
  facts.backend = backend;
  facts.world_size = bootstrap.size();
  facts.num_nodes = bootstrap.num_nodes();
  if (backend == Backend::cuda && facts.num_nodes == 1) {
    const std::string mine = encode_rank_gpu(this_rank_gpu());
    std::vector<RankGpu> ranks;
    for (const auto& blob : bootstrap.allgather(std::as_bytes(std::span(mine.data(), mine.size()))))
      ranks.push_back(decode_rank_gpu(blob));
    for (const RankGpu& rank : ranks) facts.gpu_names.push_back(rank.name);
    for (std::size_t i = 0; i < ranks.size(); ++i)
      for (std::size_t j = i + 1; j < ranks.size(); ++j)
        if (!ranks[i].bus_id.empty() && ranks[i].bus_id == ranks[j].bus_id)
          facts.gpus_shared = true;
    locate(ranks, config, facts);
  }
  return routing::topology_fingerprint(facts);
}

}  // namespace peerplan::communicator
