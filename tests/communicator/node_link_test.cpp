// SPDX-License-Identifier: Apache-2.0
// The link between each node's GPUs that the CUDA defaults depend on, from
// the ranks' cards (GPUs placed by the hwloc fixtures), and the windows the
// route resolution hands the router for it.
#include "communicator/node_link.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "communicator/cutoff_resolution.hpp"
#include "communicator/machine_fingerprint.hpp"
#include "fixture_cards.hpp"
#include "topology/pci_address.hpp"

namespace peerplan::communicator {
namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

std::vector<RankCard> one_switch_pair() {
  return cards_in("2gpu-one-switch.xml", {"0000:43:00.0", "0000:44:00.0"});
}

// The H200 VM's pair: PHB by its PCIe path, NV18 with the NVLink ends.
std::vector<RankCard> h200_pair(bool nvlinks) {
  const std::vector<std::string> buses = {"00000000:00:06.0", "00000000:00:07.0"};
  auto cards = cards_in("2gpu-h200-vm.xml", buses);
  if (nvlinks) {
    for (int r = 0; r < 2; ++r)
      cards[r].gpu.nvlinks.gpu_peers.assign(18, *topology::PciAddress::parse(buses[1 - r]));
  }
  return cards;
}

TEST(NodeLink, GpusBelowOnePcieSwitchArePcieAtTheirOwnSpeed) {
  const auto cards = one_switch_pair();
  ASSERT_TRUE(cards[0].gpu_location && cards[1].gpu_location);
  EXPECT_EQ(node_link(cards, Backend::cuda), (routing::NodeLink{true, 31508}));
}

TEST(NodeLink, NvlinkEndsMakeThePairNvlinkWhateverItsPciePath) {
  EXPECT_EQ(node_link(h200_pair(true), Backend::cuda), routing::NodeLink{});
  EXPECT_EQ(node_link(h200_pair(false), Backend::cuda), (routing::NodeLink{true, 63015}));
}

TEST(NodeLink, TheSlowestGpuOfAPcieNodeGivesTheSpeed) {
  auto cards = one_switch_pair();
  cards[1].gpu_location->pcie_mb_per_s = 15754;  // a PCIe 4.0 x8 slot
  EXPECT_EQ(node_link(cards, Backend::cuda), (routing::NodeLink{true, 15754}));
  for (auto& card : cards) card.gpu_location->pcie_mb_per_s = 0;
  EXPECT_EQ(node_link(cards, Backend::cuda), (routing::NodeLink{true, 0})) << "speed unknown";
}

TEST(NodeLink, NvmlsCapacityWinsOverTheTopologysCurrentSpeed) {
  // hwloc reads the link's state now: an idle GPU may have slowed it to 2.5 GT/s.
  auto cards = one_switch_pair();
  for (auto& card : cards) card.gpu_location->pcie_mb_per_s = 4000;
  EXPECT_EQ(node_link(cards, Backend::cuda), (routing::NodeLink{true, 4000}));
  for (auto& card : cards) card.gpu.pcie_max_mb_per_s = 31508;
  EXPECT_EQ(node_link(cards, Backend::cuda), (routing::NodeLink{true, 31508}));
  cards[1].gpu.pcie_max_mb_per_s = 0;  // NVML could not say for this one
  EXPECT_EQ(node_link(cards, Backend::cuda), (routing::NodeLink{true, 4000}));
}

TEST(NodeLink, NothingMovesOnTheHostBackendOnASharedGpuOrAnUnplacedOne) {
  EXPECT_EQ(node_link(one_switch_pair(), Backend::host), routing::NodeLink{});
  const auto shared = cards_in("2gpu-one-switch.xml", {"0000:43:00.0", "0000:43:00.0"});
  EXPECT_EQ(node_link(shared, Backend::cuda), routing::NodeLink{});
  auto unplaced = one_switch_pair();
  unplaced[1].gpu_location.reset();
  EXPECT_EQ(node_link(unplaced, Backend::cuda), routing::NodeLink{});
  EXPECT_EQ(node_link(cards_in("2gpu-one-switch.xml", {"0000:43:00.0"}), Backend::cuda),
            routing::NodeLink{})
      << "one rank has no peer";
}

TEST(NodeLink, OnSeveralNodesOnePcieNodeDecides) {
  auto cards = h200_pair(true);
  for (auto& card : cards) card.node_key = "nvlink-node";
  auto pcie = one_switch_pair();
  for (auto& card : pcie) card.node_key = "pcie-node";
  cards.insert(cards.end(), pcie.begin(), pcie.end());
  EXPECT_EQ(node_link(cards, Backend::cuda), (routing::NodeLink{true, 31508}));
  // Pairs across nodes are not P2P: two NVLink nodes stay NVLink.
  auto nvlink_nodes = h200_pair(true);
  auto second = h200_pair(true);
  for (auto& card : second) card.node_key = "b";
  nvlink_nodes.insert(nvlink_nodes.end(), second.begin(), second.end());
  EXPECT_EQ(node_link(nvlink_nodes, Backend::cuda), routing::NodeLink{});
}

TEST(NodeLink, TheResolutionHandsTheRouterTheWindowsOfTheLink) {
  const auto cards = one_switch_pair();
  const std::string fingerprint = machine_fingerprint(cards, 1, Backend::cuda);
  const Config config;
  const auto pcie = resolve_route_cutoffs(cards, 1, config, Backend::cuda, fingerprint, {});
  EXPECT_EQ(pcie.protocols.one_shot_lamport, Window::above_bytes(4 * KiB));
  EXPECT_EQ(pcie.protocols.fused_lamport, (Window{4 * KiB, 4 * MiB}));
  EXPECT_FALSE(pcie.protocols.fused_ll.has_value());
  const auto nvlink = h200_pair(true);
  EXPECT_EQ(resolve_route_cutoffs(nvlink, 1, config, Backend::cuda,
                                  machine_fingerprint(nvlink, 1, Backend::cuda), {})
                .protocols,
            routing::ProtocolTuning{});
}

TEST(NodeLink, FourRanksOverPcieSwitchesGetTheLinksOneShotLimit) {
  const auto cards = cards_in("4gpu-two-switches.xml",
                              {"0000:43:00.0", "0000:44:00.0", "0000:47:00.0", "0000:48:00.0"});
  ASSERT_EQ(node_link(cards, Backend::cuda), (routing::NodeLink{true, 31508}));
  const auto resolved = resolve_route_cutoffs(cards, 1, Config{}, Backend::cuda,
                                              machine_fingerprint(cards, 1, Backend::cuda), {});
  EXPECT_EQ(resolved.cutoffs.one_shot_max_bytes, 32 * KiB) << "512 KiB over NVLink";
  Config config;
  config.cutoffs.one_shot_max_bytes = 256 * KiB;
  EXPECT_EQ(resolve_route_cutoffs(cards, 1, config, Backend::cuda,
                                  machine_fingerprint(cards, 1, Backend::cuda), {})
                .cutoffs.one_shot_max_bytes,
            256 * KiB)
      << "an explicit cutoff wins";
}

TEST(NodeLink, ATuningEntrysWindowWinsOverTheLinks) {
  auto cards = one_switch_pair();
  const std::string fingerprint = machine_fingerprint(cards, 1, Backend::cuda);
  routing::TuningFile file;
  routing::TuningEntry entry;
  entry.fingerprint = fingerprint;
  entry.protocols.one_shot_lamport = Window::above_bytes(16 * KiB);
  file.entries.push_back(entry);
  const Config config;
  for (auto& card : cards)
    card.tuning_entries = {{fingerprint, tuning_entry_effect(config, &entry)}};
  const auto resolved = resolve_route_cutoffs(cards, 1, config, Backend::cuda, fingerprint, file);
  EXPECT_EQ(resolved.protocols.one_shot_lamport, Window::above_bytes(16 * KiB)) << "measured";
  EXPECT_EQ(resolved.protocols.fused_lamport, (Window{4 * KiB, 4 * MiB})) << "the link's";
}

}  // namespace
}  // namespace peerplan::communicator
