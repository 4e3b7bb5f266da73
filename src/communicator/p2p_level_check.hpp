// SPDX-License-Identifier: Apache-2.0
// PEERPLAN_P2P_LEVEL (Config::p2p_level) on the communicator's GPUs: each
// node gathers its ranks' GPUs, places them in the topology
// (Config::topology_file or the live machine) and checks every pair
// against the level (topology/p2p_policy.hpp); the ranks then agree on one
// verdict. For the CUDA backend, right after the device is selected: a
// pair beyond the level is a reason to leave P2P off on every rank.
#pragma once

#include <optional>
#include <string>

#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "communicator/rank_card.hpp"
#include "peerplan/config.hpp"
#include "topology/nvlink_counts.hpp"
#include "topology/p2p_policy.hpp"

namespace peerplan::communicator {

// Communicator::create uses p2p_level_verdict below, from the rank cards.
// Collective over every rank of `bootstrap`: one local_allgather of this
// rank's GPU (`pci_bus_id` as cudaDeviceGetPCIBusId prints it, empty when
// unknown; `nvlinks` as NVML reports them, empty when unknown), then one
// allgather of each rank's verdict; every rank makes both calls whatever
// happens on it. Returns the same verdict on every rank: the first rank's
// (in rank order) whose verdict has an obstacle, else the first one that
// has GPUs of unknown link, else rank 0's. A topology that cannot be
// loaded, or a GPU it does not list, leaves links unknown, never an
// obstacle (the backend's peer-access probe still decides); the verdict's
// unknown_links says so. Throws Timeout when a rank does not take part.
topology::P2PLevelVerdict gather_p2p_level_verdict(bootstrap::Bootstrap& bootstrap,
                                                   const Config& config,
                                                   const std::string& pci_bus_id,
                                                   const topology::NvlinkEnds& nvlinks);

// The same verdict from every rank's card (its GPU's bus id and NVLink
// ends, and where its own topology places the GPU), with no exchange: each
// node's ranks are checked together (`node_of_rank[r]`: rank r's node),
// and the most telling node verdict wins, ties to the lowest rank. Pure.
topology::P2PLevelVerdict p2p_level_verdict(const std::vector<RankCard>& cards,
                                            const std::vector<int>& node_of_rank, P2PLevel level);

// gather_p2p_level_verdict(...).obstacle: why P2P must stay off, or nullopt.
std::optional<std::string> p2p_level_obstacle(bootstrap::Bootstrap& bootstrap, const Config& config,
                                              const std::string& pci_bus_id,
                                              const topology::NvlinkEnds& nvlinks);

}  // namespace peerplan::communicator
