// SPDX-License-Identifier: Apache-2.0
// count_nvlinks: direct links, links through NVSwitches, one-sided
// reports, and the shape checks.
#include "topology/nvlink_counts.hpp"

#include <gtest/gtest.h>

#include "peerplan/errors.hpp"

namespace peerplan::topology {
namespace {

PciAddress bus(const char* text) { return *PciAddress::parse(text); }

TEST(NvlinkCounts, DirectLinksBetweenAPair) {
  const std::vector<PciAddress> gpus{bus("0000:00:06.0"), bus("0000:00:07.0")};
  // NVML reports each link's far end; CUDA and NVML spell bus ids differently.
  const NvlinkEnds a{std::vector<PciAddress>(4, bus("00000000:00:07.0")), 0};
  const NvlinkEnds b{std::vector<PciAddress>(4, bus("0000:00:06.0")), 0};
  EXPECT_EQ(count_nvlinks(gpus, {a, b}), (NvlinkCounts{{0, 4}, {4, 0}}));
}

TEST(NvlinkCounts, OneSidedReportStillCounts) {
  // One rank could not query NVML: the other side's report is enough.
  const std::vector<PciAddress> gpus{bus("0000:17:00.0"), bus("0000:65:00.0")};
  const NvlinkEnds a{std::vector<PciAddress>(2, bus("0000:65:00.0")), 0};
  EXPECT_EQ(count_nvlinks(gpus, {a, NvlinkEnds{}}), (NvlinkCounts{{0, 2}, {2, 0}}));
}

TEST(NvlinkCounts, SwitchLinksReachEveryGpuOnTheFabric) {
  // HGX-style: 18 links per GPU, all to NVSwitches.
  const std::vector<PciAddress> gpus{bus("0000:18:00.0"), bus("0000:2a:00.0"), bus("0000:3a:00.0")};
  const NvlinkEnds on_switch{{}, 18};
  const auto counts = count_nvlinks(gpus, {on_switch, on_switch, NvlinkEnds{{}, 12}});
  EXPECT_EQ(counts[0][1], 18);
  EXPECT_EQ(counts[1][0], 18);
  EXPECT_EQ(counts[0][2], 12);  // the GPU with fewer switch links limits the pair
  EXPECT_EQ(counts[0][0], 0);
}

TEST(NvlinkCounts, NoLinksAndLinksToOtherGpus) {
  const std::vector<PciAddress> gpus{bus("0000:43:00.0"), bus("0000:44:00.0")};
  // A link to a GPU outside the communicator does not connect this pair.
  const NvlinkEnds elsewhere{{bus("0000:99:00.0")}, 0};
  EXPECT_EQ(count_nvlinks(gpus, {elsewhere, NvlinkEnds{}}), (NvlinkCounts{{0, 0}, {0, 0}}));
}

TEST(NvlinkCounts, RanksSharingAGpuHaveNoLinkBetweenThem) {
  const std::vector<PciAddress> gpus{bus("0000:43:00.0"), bus("0000:43:00.0")};
  const NvlinkEnds switched{{}, 18};
  EXPECT_EQ(count_nvlinks(gpus, {switched, switched}), (NvlinkCounts{{0, 0}, {0, 0}}));
}

TEST(NvlinkCounts, OneReportPerGpu) {
  EXPECT_THROW(count_nvlinks({bus("0000:43:00.0")}, {}), InvalidArgument);
}

}  // namespace
}  // namespace peerplan::topology
