// SPDX-License-Identifier: Apache-2.0
// A PCIe link's MB/s from NVML's generation and width equals what hwloc
// reports for the same link (the fixtures' pci_link_speed: 31.507692 GB/s
// for 4.0 x16, 63.015385 for 5.0 x16), so the two sources compare.
#include "topology/pcie_speed.hpp"

#include <gtest/gtest.h>

namespace peerplan::topology {
namespace {

TEST(PcieSpeed, MatchesHwlocsSpeedsOfTheFixtures) {
  EXPECT_EQ(pcie_mb_per_s(4, 16), 31508u);
  EXPECT_EQ(pcie_mb_per_s(5, 16), 63015u);
}

TEST(PcieSpeed, EachGenerationsLaneRateAndCoding) {
  EXPECT_EQ(pcie_mb_per_s(1, 1), 250u);    // 2.5 GT/s, 8b/10b
  EXPECT_EQ(pcie_mb_per_s(2, 16), 8000u);  // 5 GT/s, 8b/10b
  EXPECT_EQ(pcie_mb_per_s(3, 16), 15754u);
  EXPECT_EQ(pcie_mb_per_s(4, 8), 15754u);
  EXPECT_EQ(pcie_mb_per_s(6, 16), 126031u);
}

TEST(PcieSpeed, UnknownGenerationsAndWidthsAreZero) {
  EXPECT_EQ(pcie_mb_per_s(0, 16), 0u);
  EXPECT_EQ(pcie_mb_per_s(7, 16), 0u);
  EXPECT_EQ(pcie_mb_per_s(4, 0), 0u);
  EXPECT_EQ(pcie_mb_per_s(4, 64), 0u);
}

}  // namespace
}  // namespace peerplan::topology
