// SPDX-License-Identifier: Apache-2.0
// PEERPLAN_P2P_LEVEL (Config::p2p_level) on the communicator's GPUs, from
// the rank cards: each node's GPUs, placed by each rank's own topology
// (Config::topology_file or the live machine), pair by pair against the
// level (topology/p2p_policy.hpp). For the CUDA backend: a pair beyond the
// level is a reason to leave P2P off on every rank.
#pragma once

#include <string>
#include <vector>

#include "communicator/rank_card.hpp"
#include "peerplan/config.hpp"
#include "topology/p2p_policy.hpp"

namespace peerplan::communicator {

// The verdict from every rank's card (its GPU's bus id and NVLink ends,
// and where its own topology places the GPU), with no exchange: each
// node's ranks are checked together (`node_of_rank[r]`: rank r's node),
// and the most telling node verdict wins, ties to the lowest rank. Pure.
topology::P2PLevelVerdict p2p_level_verdict(const std::vector<RankCard>& cards,
                                            const std::vector<int>& node_of_rank, P2PLevel level);

// The WARN for a rank whose explicit topology file (Config::topology_file,
// PEERPLAN_TOPO_FILE) does not list its GPU `bus_id`: the file and the GPU
// by name, what that does at `level` (its links are unknown: beyond an
// explicit level below SYS, allowed unchecked at auto and SYS), and what to
// change. `file_gpus`: how many GPUs the file lists.
std::string topology_file_lacks_gpu(const std::string& topology_file, const std::string& bus_id,
                                    std::size_t file_gpus, P2PLevel level);

}  // namespace peerplan::communicator
