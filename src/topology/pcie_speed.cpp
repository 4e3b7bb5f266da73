// SPDX-License-Identifier: Apache-2.0
#include "topology/pcie_speed.hpp"

#include <array>
#include <cmath>

namespace peerplan::topology {

std::uint32_t pcie_mb_per_s(unsigned generation, unsigned width) noexcept {
  // GT/s a lane; 8b/10b coding up to 2.0, 128b/130b from 3.0 (as hwloc
  // counts 6.0 too).
  constexpr std::array<double, 6> kLaneRate = {2.5, 5.0, 8.0, 16.0, 32.0, 64.0};
  if (generation < 1 || generation > kLaneRate.size() || width < 1 || width > 32) return 0;
  const double coding = generation <= 2 ? 8.0 / 10.0 : 128.0 / 130.0;
  const double gb_per_s = kLaneRate[generation - 1] * width * coding / 8.0;
  return static_cast<std::uint32_t>(std::lround(gb_per_s * 1000.0));
}

}  // namespace peerplan::topology
