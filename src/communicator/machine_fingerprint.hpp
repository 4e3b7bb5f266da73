// SPDX-License-Identifier: Apache-2.0
// The communicator's topology fingerprint (routing/fingerprint.hpp), from
// facts gathered from every rank so that every rank computes the same one.
#pragma once

#include <string>
#include <vector>

#include "communicator/rank_card.hpp"
#include "peerplan/config.hpp"

namespace peerplan::communicator {

// From every rank's card (its GPU's model, PCI bus id, NVLink ends and
// where its own topology placed it), used when `backend` is cuda and the
// communicator is on one node. Pure: no exchange, the same on every rank.
// Never throws for lack of facts: what cannot be found reads as "unknown".
std::string machine_fingerprint(const std::vector<RankCard>& cards, int num_nodes, Backend backend);

}  // namespace peerplan::communicator
