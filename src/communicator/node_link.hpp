// SPDX-License-Identifier: Apache-2.0
// The link between each node's GPUs that the CUDA defaults depend on
// (routing::NodeLink), from every rank's card, so that every rank works out
// the same one without an exchange.
#pragma once

#include <vector>

#include "communicator/rank_card.hpp"
#include "peerplan/config.hpp"
#include "routing/defaults.hpp"

namespace peerplan::communicator {

// PCIe when, on some node, a pair of the ranks' GPUs is linked by PCIe only
// (no NVLink); its speed the slowest of those nodes' GPUs' own links (as
// NVML gives its capacity, else as the topology gives its current speed).
// Nothing set (NVLink or unknown) on the host backend, when ranks share a
// GPU (for testing), and when a rank's topology does not place its GPU: the
// measured defaults then stay.
routing::NodeLink node_link(const std::vector<RankCard>& cards, Backend backend);

}  // namespace peerplan::communicator
