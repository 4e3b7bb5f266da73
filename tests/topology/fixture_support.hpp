// SPDX-License-Identifier: Apache-2.0
// What the topology tests share: where the hwloc XML fixtures are, and the
// P2P levels in order from closest to farthest.
#pragma once

#include <array>
#include <string>

#include "peerplan/config.hpp"

namespace peerplan::topology {

inline std::string fixture_path(const std::string& name) {
  return std::string(PEERPLAN_TEST_FIXTURES) + "/topology/" + name;
}

inline constexpr std::array<P2PLevel, 7> kLevels = {P2PLevel::loc, P2PLevel::nvl, P2PLevel::pix,
                                                    P2PLevel::pxb, P2PLevel::phb, P2PLevel::node,
                                                    P2PLevel::sys};

}  // namespace peerplan::topology
