// SPDX-License-Identifier: Apache-2.0
// Rank cards for the tests of create's decisions: on named nodes, with the
// agreed settings of a Config, and with GPUs placed by an hwloc fixture
// (tests/fixtures/topology).
#pragma once

#include <string>
#include <vector>

#include "communicator/rank_card.hpp"
#include "core/config_fields.hpp"
#include "peerplan/config.hpp"
#include "topology/topology.hpp"

namespace peerplan::communicator {

inline RankCard card_on(const std::string& node, const Config& config = {}) {
  RankCard card;
  card.node_key = node;
  card.machine_key = "machine";
  for (const auto& field : core::config_fields(config))
    if (field.agreed) card.agreed_settings.push_back({field.name, field.variable, field.value});
  return card;
}

inline std::vector<RankCard> cards_on(const std::vector<std::string>& nodes) {
  std::vector<RankCard> cards;
  for (const auto& node : nodes) cards.push_back(card_on(node));
  return cards;
}

// Cards on node "a" whose GPUs (`buses`, one a rank) `fixture` places.
inline std::vector<RankCard> cards_in(const std::string& fixture,
                                      const std::vector<std::string>& buses) {
  const auto machine =
      topology::Topology::load(std::string(PEERPLAN_TEST_FIXTURES) + "/topology/" + fixture);
  auto cards = cards_on(std::vector<std::string>(buses.size(), "a"));
  for (std::size_t r = 0; r < cards.size(); ++r) {
    cards[r].gpu.bus_id = buses[r];
    cards[r].gpu_location = machine.find_gpu(buses[r]);
  }
  return cards;
}

}  // namespace peerplan::communicator
