// SPDX-License-Identifier: Apache-2.0
// Filling this rank's card (rank_card.hpp) from local facts, and the one
// exchange of Communicator::create that publishes every rank's card.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "communicator/rank_card.hpp"
#include "peerplan/config.hpp"
#include "routing/tuning_file.hpp"

namespace peerplan::communicator {

// This rank's card, and what filling it found that stays on this rank.
struct OwnCard {
  RankCard card;
  std::optional<routing::TuningFile> tuning;  // the parsed file, when one was read
  std::string locality;                       // where this process runs, for INFO
  int device = -1;  // the CUDA device this rank selected (and made current); -1: none
};

// Local, never throws for a bad setting: every failure goes into the card.
// `settings_error`: why the environment did not parse (apply_environment's
// message), or nullopt. `local_rank` picks the GPU on the CUDA backend.
OwnCard fill_own_card(const Config& config, const std::optional<std::string>& settings_error,
                      int local_rank);

// Collective: one allgather, bounded by the bootstrap's timeout (Timeout
// naming the missing ranks). Every rank's card, by rank; throws Mismatch on
// every rank when a rank's card cannot be read (another build).
std::vector<RankCard> exchange_cards(bootstrap::Bootstrap& bootstrap, const RankCard& mine);

}  // namespace peerplan::communicator
