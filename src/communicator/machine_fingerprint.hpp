// SPDX-License-Identifier: Apache-2.0
// The communicator's topology fingerprint (routing/fingerprint.hpp), from
// facts gathered from every rank so that every rank computes the same one.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "communicator/rank_card.hpp"
#include "peerplan/config.hpp"
#include "topology/nvlink_counts.hpp"

namespace peerplan::communicator {

// The GPUs of `ranks` (indices into `cards`) as each rank's own topology
// placed them, and the NVLinks between them (the inputs of
// routing::farthest_link); nullopt when one of them is not placed.
struct PlacedGpus {
  std::vector<topology::GpuLocation> gpus;
  topology::NvlinkCounts nvlinks;
};
std::optional<PlacedGpus> placed_gpus(const std::vector<RankCard>& cards,
                                      const std::vector<std::size_t>& ranks);

// From every rank's card (its GPU's model, PCI bus id, NVLink ends and
// where its own topology placed it), used when `backend` is cuda and the
// communicator is on one node. Pure: no exchange, the same on every rank.
// Never throws for lack of facts: what cannot be found reads as "unknown".
std::string machine_fingerprint(const std::vector<RankCard>& cards, int num_nodes, Backend backend);

}  // namespace peerplan::communicator
