// SPDX-License-Identifier: Apache-2.0
// PEERPLAN_P2P_LEVEL on every hwloc fixture (tests/fixtures/topology,
// README.md there derives each machine's `nvidia-smi topo -m` matrix): for
// ranks placed on the fixture's GPUs (one per rank, subsets, ranks sharing
// a GPU, with and without NVLink counts) every level is checked, and the
// pair the reason names is the one written here by hand from that matrix.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "peerplan/errors.hpp"
#include "topology/p2p_policy.hpp"
#include "topology/topology.hpp"
#include "fixture_support.hpp"

namespace peerplan::topology {
namespace {

// Ranks placed on a fixture's GPUs, and what the policy must say at each level.
struct Assignment {
  std::string name;                  // test name
  std::string fixture;               // file in tests/fixtures/topology
  std::vector<std::string> bus_ids;  // GPU of each rank, in rank order
  int first_rank = 0;                // the first rank's number (the others follow)
  int nvlinks = 0;                   // NVLinks between every two distinct GPUs (0: none known)
  // Per level LOC, NVL, PIX, PXB, PHB, NODE, SYS: "i j CLASS" for the first
  // pair (indexes into bus_ids) beyond the level, "" when every pair is allowed.
  std::array<std::string, 7> first_beyond;
  std::array<int, 7> allowed_pairs;  // pairs within each level
  const char* level_allowing_all;    // what the reason tells the user to set
};

std::ostream& operator<<(std::ostream& out, const Assignment& a) { return out << a.name; }

const std::vector<Assignment>& assignments() {
  static const std::vector<Assignment> cases = {
      // Both L40S below one switch: PIX.
      {"one_switch_both",
       "2gpu-one-switch.xml",
       {"0000:43:00.0", "0000:44:00.0"},
       0,
       0,
       {"0 1 PIX", "0 1 PIX", "", "", "", "", ""},
       {0, 0, 1, 1, 1, 1, 1},
       "PIX"},
      // Two ranks on one GPU: a LOC pair, allowed even at LOC.
      {"one_switch_two_ranks_one_gpu",
       "2gpu-one-switch.xml",
       {"0000:43:00.0", "0000:43:00.0"},
       0,
       0,
       {"", "", "", "", "", "", ""},
       {1, 1, 1, 1, 1, 1, 1},
       "LOC"},
      // Ranks 0 and 1 share GPU0; each reaches GPU1 through the switch.
      {"one_switch_three_ranks",
       "2gpu-one-switch.xml",
       {"0000:43:00.0", "0000:43:00.0", "0000:44:00.0"},
       0,
       0,
       {"0 2 PIX", "0 2 PIX", "", "", "", "", ""},
       {1, 1, 3, 3, 3, 3, 3},
       "PIX"},

      // Two switches on root ports of one root complex: PIX within, PHB across.
      {"two_switches_all",
       "4gpu-two-switches.xml",
       {"0000:43:00.0", "0000:44:00.0", "0000:47:00.0", "0000:48:00.0"},
       0,
       0,
       {"0 1 PIX", "0 1 PIX", "0 2 PHB", "0 2 PHB", "", "", ""},
       {0, 0, 2, 2, 6, 6, 6},
       "PHB"},
      {"two_switches_second_switch",
       "4gpu-two-switches.xml",
       {"0000:47:00.0", "0000:48:00.0"},
       0,
       0,
       {"0 1 PIX", "0 1 PIX", "", "", "", "", ""},
       {0, 0, 1, 1, 1, 1, 1},
       "PIX"},
      {"two_switches_across",
       "4gpu-two-switches.xml",
       {"0000:44:00.0", "0000:47:00.0"},
       2,
       0,
       {"0 1 PHB", "0 1 PHB", "0 1 PHB", "0 1 PHB", "", "", ""},
       {0, 0, 0, 0, 1, 1, 1},
       "PHB"},
      {"two_switches_shared_gpu",
       "4gpu-two-switches.xml",
       {"0000:43:00.0", "0000:43:00.0", "0000:48:00.0"},
       0,
       0,
       {"0 2 PHB", "0 2 PHB", "0 2 PHB", "0 2 PHB", "", "", ""},
       {1, 1, 1, 1, 3, 3, 3},
       "PHB"},

      // Inner switches below one outer switch: PIX within an inner switch, PXB across.
      {"cascaded_all",
       "4gpu-cascaded-switches.xml",
       {"0000:34:00.0", "0000:36:00.0", "0000:39:00.0", "0000:3b:00.0"},
       0,
       0,
       {"0 1 PIX", "0 1 PIX", "0 2 PXB", "", "", "", ""},
       {0, 0, 2, 6, 6, 6, 6},
       "PXB"},
      {"cascaded_across_inner_switches",
       "4gpu-cascaded-switches.xml",
       {"0000:36:00.0", "0000:39:00.0"},
       0,
       0,
       {"0 1 PXB", "0 1 PXB", "0 1 PXB", "", "", "", ""},
       {0, 0, 0, 1, 1, 1, 1},
       "PXB"},
      // The real DGX-2: 6 NVLinks (NVSwitch) between every pair, NV6 wins over PCIe.
      {"cascaded_all_nvlink",
       "4gpu-cascaded-switches.xml",
       {"0000:34:00.0", "0000:36:00.0", "0000:39:00.0", "0000:3b:00.0"},
       0,
       6,
       {"0 1 NV6", "", "", "", "", "", ""},
       {0, 6, 6, 6, 6, 6, 6},
       "NVL"},

      // Two sockets, two root complexes each: PIX, NODE within a socket, SYS across.
      {"two_sockets_all",
       "8gpu-two-sockets.xml",
       {"0000:03:00.0", "0000:04:00.0", "0000:23:00.0", "0000:24:00.0", "0000:83:00.0",
        "0000:84:00.0", "0000:a3:00.0", "0000:a4:00.0"},
       0,
       0,
       {"0 1 PIX", "0 1 PIX", "0 2 NODE", "0 2 NODE", "0 2 NODE", "0 4 SYS", ""},
       {0, 0, 4, 4, 4, 12, 28},
       "SYS"},
      {"two_sockets_second_socket",
       "8gpu-two-sockets.xml",
       {"0000:83:00.0", "0000:84:00.0", "0000:a3:00.0", "0000:a4:00.0"},
       4,
       0,
       {"0 1 PIX", "0 1 PIX", "0 2 NODE", "0 2 NODE", "0 2 NODE", "", ""},
       {0, 0, 2, 2, 2, 6, 6},
       "NODE"},
      {"two_sockets_one_pair_across",
       "8gpu-two-sockets.xml",
       {"0000:04:00.0", "0000:83:00.0"},
       0,
       0,
       {"0 1 SYS", "0 1 SYS", "0 1 SYS", "0 1 SYS", "0 1 SYS", "0 1 SYS", ""},
       {0, 0, 0, 0, 0, 0, 1},
       "SYS"},
      // The first pair beyond the level changes with the level.
      {"two_sockets_node_then_sys",
       "8gpu-two-sockets.xml",
       {"0000:03:00.0", "0000:23:00.0", "0000:a3:00.0"},
       0,
       0,
       {"0 1 NODE", "0 1 NODE", "0 1 NODE", "0 1 NODE", "0 1 NODE", "0 2 SYS", ""},
       {0, 0, 0, 0, 0, 1, 3},
       "SYS"},
      {"two_sockets_second_socket_first",
       "8gpu-two-sockets.xml",
       {"0000:83:00.0", "0000:84:00.0", "0000:03:00.0"},
       0,
       0,
       {"0 1 PIX", "0 1 PIX", "0 2 SYS", "0 2 SYS", "0 2 SYS", "0 2 SYS", ""},
       {0, 0, 1, 1, 1, 1, 3},
       "SYS"},
      {"two_sockets_two_ranks_per_gpu",
       "8gpu-two-sockets.xml",
       {"0000:03:00.0", "0000:03:00.0", "0000:83:00.0", "0000:83:00.0"},
       0,
       0,
       {"0 2 SYS", "0 2 SYS", "0 2 SYS", "0 2 SYS", "0 2 SYS", "0 2 SYS", ""},
       {2, 2, 2, 2, 2, 2, 6},
       "SYS"},

      // The captured H200 VM, bus ids in CUDA's spelling: PHB on PCIe, NV18 really.
      {"h200_vm_pcie_only",
       "2gpu-h200-vm.xml",
       {"00000000:00:06.0", "00000000:00:07.0"},
       0,
       0,
       {"0 1 PHB", "0 1 PHB", "0 1 PHB", "0 1 PHB", "", "", ""},
       {0, 0, 0, 0, 1, 1, 1},
       "PHB"},
      {"h200_vm_nvlink",
       "2gpu-h200-vm.xml",
       {"00000000:00:06.0", "00000000:00:07.0"},
       0,
       18,
       {"0 1 NV18", "", "", "", "", "", ""},
       {0, 1, 1, 1, 1, 1, 1},
       "NVL"},
      {"h200_vm_two_ranks_one_gpu",
       "2gpu-h200-vm.xml",
       {"00000000:00:06.0", "00000000:00:06.0"},
       0,
       18,
       {"", "", "", "", "", "", ""},
       {1, 1, 1, 1, 1, 1, 1},
       "LOC"},
      {"h200_vm_shared_gpu_and_nvlink",
       "2gpu-h200-vm.xml",
       {"00000000:00:06.0", "00000000:00:06.0", "00000000:00:07.0"},
       0,
       18,
       {"0 2 NV18", "", "", "", "", "", ""},
       {1, 3, 3, 3, 3, 3, 3},
       "NVL"},
  };
  return cases;
}

struct Placed {
  std::vector<RankGpuPlacement> ranks;
  NvlinkCounts nvlinks;
};

// Places every rank's GPU with the fixture's topology (all must be found).
Placed place(const Assignment& a) {
  const auto topology = Topology::load_xml(fixture_path(a.fixture));
  Placed placed;
  for (std::size_t i = 0; i < a.bus_ids.size(); ++i) {
    auto location = topology.find_gpu(a.bus_ids[i]);
    if (!location) throw std::runtime_error(a.bus_ids[i] + " is not a GPU of " + a.fixture);
    placed.ranks.push_back({a.first_rank + static_cast<int>(i), a.bus_ids[i], location});
  }
  if (a.nvlinks > 0) {
    const std::size_t n = a.bus_ids.size();
    placed.nvlinks.assign(n, std::vector<int>(n, 0));
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j)
        if (placed.ranks[i].location->address != placed.ranks[j].location->address)
          placed.nvlinks[i][j] = a.nvlinks;
  }
  return placed;
}

// "0000:00:06.0" for "00000000:00:06.0": messages use the topology's spelling.
std::string canonical(const std::string& bus_id) { return PciAddress::parse(bus_id)->to_string(); }

// Checks the verdict at one level against the expected first pair beyond it.
void expect_verdict(const Assignment& a, const P2PLevelVerdict& verdict, P2PLevel level,
                    const std::string& first_beyond, int allowed) {
  const int n = static_cast<int>(a.bus_ids.size());
  const int pairs = n * (n - 1) / 2;
  const std::string where = std::string("at level ") + to_string(level);
  EXPECT_EQ(verdict.pairs, pairs) << where;
  EXPECT_EQ(verdict.allowed_pairs, allowed) << where;
  EXPECT_EQ(verdict.beyond_pairs, pairs - allowed) << where;
  EXPECT_EQ(verdict.unknown_pairs, 0) << where;
  EXPECT_FALSE(verdict.unknown_links.has_value()) << where << ": " << *verdict.unknown_links;
  if (first_beyond.empty()) {
    EXPECT_FALSE(verdict.obstacle.has_value()) << where << ": " << *verdict.obstacle;
    return;
  }
  ASSERT_TRUE(verdict.obstacle.has_value())
      << where << " the pair " << first_beyond << " must block P2P";
  std::size_t i = 0, j = 0;
  char link[16] = {};
  ASSERT_EQ(std::sscanf(first_beyond.c_str(), "%zu %zu %15s", &i, &j, link), 3);
  const std::string& reason = *verdict.obstacle;
  const std::string pair = "ranks " + std::to_string(a.first_rank + static_cast<int>(i)) + " and " +
                           std::to_string(a.first_rank + static_cast<int>(j)) + ": GPUs " +
                           canonical(a.bus_ids[i]) + " and " + canonical(a.bus_ids[j]) +
                           " are linked through " + link + " (";
  EXPECT_EQ(reason.rfind(pair, 0), 0u) << where << ": " << reason;
  EXPECT_NE(reason.find(std::string("beyond PEERPLAN_P2P_LEVEL=") + to_string(level) + " ("),
            std::string::npos)
      << where << ": " << reason;
  const int beyond = pairs - allowed;
  if (beyond > 1) {
    EXPECT_NE(reason.find("as are " + std::to_string(beyond - 1) + " more of the " +
                          std::to_string(pairs) + " GPU pairs"),
              std::string::npos)
        << where << ": " << reason;
  }
  const std::string advice = std::string("; set PEERPLAN_P2P_LEVEL=") + a.level_allowing_all +
                             (beyond > 1 ? " to allow them all" : " to allow it");
  EXPECT_NE(reason.find(advice), std::string::npos) << where << ": " << reason;
}

class P2PPolicyOnFixture : public ::testing::TestWithParam<Assignment> {};

TEST_P(P2PPolicyOnFixture, BlocksExactlyTheLevelsBelowTheFarthestPair) {
  const Assignment& a = GetParam();
  const Placed placed = place(a);
  for (std::size_t l = 0; l < kLevels.size(); ++l) {
    const auto verdict = check_p2p_level(placed.ranks, placed.nvlinks, kLevels[l]);
    expect_verdict(a, verdict, kLevels[l], a.first_beyond[l], a.allowed_pairs[l]);
  }
}

TEST_P(P2PPolicyOnFixture, AutoActsAsNode) {
  const Assignment& a = GetParam();
  const Placed placed = place(a);
  const auto automatic = check_p2p_level(placed.ranks, placed.nvlinks, P2PLevel::automatic);
  const auto node = check_p2p_level(placed.ranks, placed.nvlinks, P2PLevel::node);
  EXPECT_EQ(automatic.obstacle.has_value(), node.obstacle.has_value());
  EXPECT_EQ(automatic.allowed_pairs, node.allowed_pairs);
  EXPECT_EQ(automatic.beyond_pairs, node.beyond_pairs);
  if (automatic.obstacle) {
    EXPECT_NE(automatic.obstacle->find("beyond PEERPLAN_P2P_LEVEL=auto (the default: NODE"),
              std::string::npos)
        << *automatic.obstacle;
    // The same pair and advice; only the level's name differs.
    const auto pair_of = [](const std::string& reason) {
      return reason.substr(0, reason.find(", beyond"));
    };
    EXPECT_EQ(pair_of(*automatic.obstacle), pair_of(*node.obstacle));
  }
}

TEST_P(P2PPolicyOnFixture, SummaryHasOneLinePerPair) {
  const Assignment& a = GetParam();
  const Placed placed = place(a);
  const auto verdict = check_p2p_level(placed.ranks, placed.nvlinks, P2PLevel::automatic);
  const std::string& summary = verdict.summary;
  EXPECT_EQ(summary.rfind("PEERPLAN_P2P_LEVEL=auto", 0), 0u) << summary;
  const auto lines = std::count(summary.begin(), summary.end(), '\n');
  EXPECT_EQ(lines, verdict.pairs) << summary;
  EXPECT_NE(summary.find(std::to_string(verdict.allowed_pairs) + " allowed, " +
                         std::to_string(verdict.beyond_pairs) + " beyond the level"),
            std::string::npos)
      << summary;
  // Every pair line names both GPUs in the topology's spelling.
  for (std::size_t i = 0; i < a.bus_ids.size(); ++i)
    EXPECT_NE(summary.find(canonical(a.bus_ids[i])), std::string::npos) << summary;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, P2PPolicyOnFixture, ::testing::ValuesIn(assignments()),
                         [](const auto& info) { return info.param.name; });

// --- GPUs the topology cannot place ----------------------------------------------

RankGpuPlacement on(const Topology& topology, int rank, const std::string& bus_id) {
  return {rank, bus_id, topology.find_gpu(bus_id)};
}

TEST(P2PPolicyUnplaced, UnknownLinksAreBeyondAnExplicitLevelBelowSys) {
  // NCCL leaves P2P off for a GPU missing from its topology: a level set on
  // purpose is honoured for a pair whose link nobody knows.
  const auto topology = Topology::load_xml(fixture_path("2gpu-one-switch.xml"));
  const std::vector<RankGpuPlacement> ranks = {on(topology, 0, "0000:43:00.0"),
                                               on(topology, 1, "0000:99:00.0")};
  ASSERT_FALSE(ranks[1].location.has_value());
  for (P2PLevel level :
       {P2PLevel::nvl, P2PLevel::pix, P2PLevel::pxb, P2PLevel::phb, P2PLevel::node}) {
    const auto verdict = check_p2p_level(ranks, {}, level);
    ASSERT_TRUE(verdict.obstacle.has_value()) << to_string(level);
    const std::string& reason = *verdict.obstacle;
    EXPECT_EQ(reason.rfind("ranks 0 and 1 use different GPUs (0000:43:00.0 and 0000:99:00.0)", 0),
              0u)
        << reason;
    // Why the link is unknown, and what to change.
    EXPECT_NE(reason.find("does not list GPU 0000:99:00.0 (rank 1)"), std::string::npos) << reason;
    EXPECT_NE(reason.find("/sys hides PCI devices"), std::string::npos) << reason;
    EXPECT_NE(reason.find("PEERPLAN_TOPO_FILE lacks the GPU"), std::string::npos) << reason;
    EXPECT_NE(reason.find(std::string("beyond PEERPLAN_P2P_LEVEL=") + to_string(level)),
              std::string::npos)
        << reason;
    EXPECT_NE(reason.find("set PEERPLAN_TOPO_FILE to an hwloc XML"), std::string::npos) << reason;
    EXPECT_NE(reason.find("PEERPLAN_P2P_LEVEL=SYS or auto to allow it"), std::string::npos)
        << reason;
    EXPECT_EQ(verdict.beyond_pairs, 1);
    EXPECT_EQ(verdict.unknown_pairs, 0);
    EXPECT_EQ(verdict.allowed_pairs, 0);
    EXPECT_FALSE(verdict.unknown_links.has_value()) << *verdict.unknown_links;
    EXPECT_NE(verdict.summary.find("unknown, beyond the level"), std::string::npos)
        << verdict.summary;
  }
}

TEST(P2PPolicyUnplaced, UnknownLinksAreAllowedAtSysAndAuto) {
  const auto topology = Topology::load_xml(fixture_path("2gpu-one-switch.xml"));
  const std::vector<RankGpuPlacement> ranks = {on(topology, 0, "0000:43:00.0"),
                                               on(topology, 1, "0000:99:00.0")};
  for (P2PLevel level : {P2PLevel::sys, P2PLevel::automatic}) {
    const auto verdict = check_p2p_level(ranks, {}, level);
    EXPECT_FALSE(verdict.obstacle.has_value()) << to_string(level) << ": " << *verdict.obstacle;
    EXPECT_EQ(verdict.unknown_pairs, 1);
    EXPECT_EQ(verdict.beyond_pairs, 0);
    EXPECT_EQ(verdict.allowed_pairs, 0);
    ASSERT_TRUE(verdict.unknown_links.has_value());
    EXPECT_NE(verdict.unknown_links->find("rank 1 (0000:99:00.0)"), std::string::npos)
        << *verdict.unknown_links;
    EXPECT_NE(verdict.summary.find("not checked"), std::string::npos) << verdict.summary;
  }
  // At auto the INFO line says why, and how to have the link checked.
  const auto automatic = check_p2p_level(ranks, {}, P2PLevel::automatic);
  EXPECT_NE(automatic.unknown_links->find("allowed by PEERPLAN_P2P_LEVEL=auto"), std::string::npos)
      << *automatic.unknown_links;
  EXPECT_NE(automatic.unknown_links->find("set PEERPLAN_TOPO_FILE"), std::string::npos)
      << *automatic.unknown_links;
}

TEST(P2PPolicyUnplaced, UnknownAndKnownPairsBeyondTheLevelNeedSys) {
  // Two sockets: ranks 0 and 1 across them (SYS), rank 2's GPU unlisted.
  const auto topology = Topology::load_xml(fixture_path("8gpu-two-sockets.xml"));
  const std::vector<RankGpuPlacement> ranks = {on(topology, 0, "0000:03:00.0"),
                                               on(topology, 1, "0000:83:00.0"),
                                               on(topology, 2, "0000:f1:00.0")};
  ASSERT_FALSE(ranks[2].location.has_value());
  const auto verdict = check_p2p_level(ranks, {}, P2PLevel::pxb);
  ASSERT_TRUE(verdict.obstacle.has_value());
  const std::string& reason = *verdict.obstacle;
  EXPECT_EQ(reason.rfind("ranks 0 and 1: GPUs 0000:03:00.0 and 0000:83:00.0 are linked through "
                         "SYS (",
                         0),
            0u)
      << reason;
  EXPECT_EQ(verdict.beyond_pairs, 3);
  EXPECT_EQ(verdict.unknown_pairs, 0);
  // auto would still refuse the SYS pair: only SYS allows them all.
  EXPECT_NE(reason.find("or PEERPLAN_P2P_LEVEL=SYS to allow them all"), std::string::npos)
      << reason;
  EXPECT_NE(reason.find("set PEERPLAN_TOPO_FILE"), std::string::npos) << reason;
  EXPECT_FALSE(check_p2p_level(ranks, {}, P2PLevel::sys).obstacle.has_value());
}

TEST(P2PPolicyUnplaced, NoTopologyAtAllRefusesAnExplicitLevel) {
  // A topology that lists no GPU (the whole of /sys PCI hidden): every
  // pair of two GPUs is unknown, so NVL refuses them unless NVLink is known.
  const std::vector<RankGpuPlacement> ranks = {{0, "0000:17:00.0", {}}, {1, "0000:b1:00.0", {}}};
  const auto verdict = check_p2p_level(ranks, {}, P2PLevel::nvl);
  ASSERT_TRUE(verdict.obstacle.has_value());
  EXPECT_NE(verdict.obstacle->find(
                "lists neither GPU 0000:17:00.0 (rank 0) nor GPU 0000:b1:00.0 (rank 1)"),
            std::string::npos)
      << *verdict.obstacle;
  EXPECT_FALSE(check_p2p_level(ranks, {{0, 2}, {2, 0}}, P2PLevel::nvl).obstacle.has_value());
}

TEST(P2PPolicyUnplaced, LocStillBlocksTwoDifferentGpus) {
  // At LOC any link between two GPUs is too far, known or not.
  const auto topology = Topology::load_xml(fixture_path("2gpu-one-switch.xml"));
  const std::vector<RankGpuPlacement> ranks = {on(topology, 0, "0000:43:00.0"),
                                               on(topology, 1, "0000:99:00.0")};
  const auto verdict = check_p2p_level(ranks, {}, P2PLevel::loc);
  ASSERT_TRUE(verdict.obstacle.has_value());
  EXPECT_EQ(verdict.obstacle->rfind("ranks 0 and 1 use different GPUs (0000:43:00.0 and "
                                    "0000:99:00.0)",
                                    0),
            0u)
      << *verdict.obstacle;
  EXPECT_NE(verdict.obstacle->find("beyond PEERPLAN_P2P_LEVEL=LOC"), std::string::npos);
  EXPECT_EQ(verdict.beyond_pairs, 1);
}

TEST(P2PPolicyUnplaced, WithoutABusIdNothingIsKnownEvenAtLoc) {
  const auto topology = Topology::load_xml(fixture_path("2gpu-one-switch.xml"));
  const std::vector<RankGpuPlacement> ranks = {on(topology, 0, "0000:43:00.0"), {1, "", {}}};
  const auto verdict = check_p2p_level(ranks, {}, P2PLevel::loc);
  EXPECT_FALSE(verdict.obstacle.has_value()) << *verdict.obstacle;
  ASSERT_TRUE(verdict.unknown_links.has_value());
  EXPECT_NE(verdict.unknown_links->find("rank 1 ((no bus id))"), std::string::npos)
      << *verdict.unknown_links;
}

TEST(P2PPolicyUnplaced, SameBusIdIsOneGpuAndNvlinkIsKnownWithoutThePcieTree) {
  // No topology at all (it failed to load): two ranks reporting one GPU
  // in different spellings share it; NVLink counts still classify a pair.
  const std::vector<RankGpuPlacement> ranks = {
      {0, "00000000:17:00.0", {}}, {1, "0000:17:00.0", {}}, {2, "0000:b1:00.0", {}}};
  const NvlinkCounts nvlinks = {{0, 0, 4}, {0, 0, 4}, {4, 4, 0}};
  const auto at_nvl = check_p2p_level(ranks, nvlinks, P2PLevel::nvl);
  EXPECT_FALSE(at_nvl.obstacle.has_value()) << *at_nvl.obstacle;
  EXPECT_EQ(at_nvl.allowed_pairs, 3);
  EXPECT_FALSE(at_nvl.unknown_links.has_value());
  const auto at_loc = check_p2p_level(ranks, nvlinks, P2PLevel::loc);
  ASSERT_TRUE(at_loc.obstacle.has_value());
  EXPECT_EQ(at_loc.obstacle->rfind("ranks 0 and 2: GPUs 0000:17:00.0 and 0000:b1:00.0 are "
                                   "linked through NV4 (4 NVLinks)",
                                   0),
            0u)
      << *at_loc.obstacle;
  EXPECT_NE(at_loc.obstacle->find("set PEERPLAN_P2P_LEVEL=NVL to allow them all"),
            std::string::npos)
      << *at_loc.obstacle;
  EXPECT_EQ(at_loc.allowed_pairs, 1);  // ranks 0 and 1, one GPU
}

TEST(P2PPolicyUnplaced, AKnownPairBeyondTheLevelStillBlocks) {
  const auto topology = Topology::load_xml(fixture_path("8gpu-two-sockets.xml"));
  const std::vector<RankGpuPlacement> ranks = {on(topology, 0, "0000:03:00.0"),
                                               on(topology, 1, "0000:f1:00.0"),
                                               on(topology, 2, "0000:83:00.0")};
  const auto verdict = check_p2p_level(ranks, {}, P2PLevel::automatic);
  ASSERT_TRUE(verdict.obstacle.has_value());
  EXPECT_EQ(verdict.obstacle->rfind("ranks 0 and 2: GPUs 0000:03:00.0 and 0000:83:00.0 are "
                                    "linked through SYS (",
                                    0),
            0u)
      << *verdict.obstacle;
  EXPECT_EQ(verdict.unknown_pairs, 2);
  EXPECT_EQ(verdict.beyond_pairs, 1);
  ASSERT_TRUE(verdict.unknown_links.has_value());
  EXPECT_NE(verdict.unknown_links->find("rank 1 (0000:f1:00.0)"), std::string::npos)
      << *verdict.unknown_links;
}

// --- arguments and degenerate cases ------------------------------------------------

TEST(P2PPolicy, OneRankOrNoneHasNoPairToBlock) {
  const auto topology = Topology::load_xml(fixture_path("2gpu-one-switch.xml"));
  for (P2PLevel level : kLevels) {
    EXPECT_FALSE(check_p2p_level({}, {}, level).obstacle.has_value());
    const auto verdict = check_p2p_level({on(topology, 0, "0000:43:00.0")}, {}, level);
    EXPECT_FALSE(verdict.obstacle.has_value());
    EXPECT_EQ(verdict.pairs, 0);
  }
}

TEST(P2PPolicy, RejectsNvlinkCountsOfTheWrongShape) {
  const std::vector<RankGpuPlacement> ranks = {{0, "0000:17:00.0", {}}, {1, "0000:18:00.0", {}}};
  EXPECT_THROW(check_p2p_level(ranks, {{0, 1}}, P2PLevel::sys), InvalidArgument);
  EXPECT_THROW(check_p2p_level(ranks, {{0, 1}, {1}}, P2PLevel::sys), InvalidArgument);
  EXPECT_THROW(check_p2p_level(ranks, {{0, -1}, {-1, 0}}, P2PLevel::sys), InvalidArgument);
  EXPECT_NO_THROW(check_p2p_level(ranks, {{0, 1}, {1, 0}}, P2PLevel::sys));
}

TEST(P2PPolicy, EffectiveLevelAndLevelNeeded) {
  EXPECT_EQ(effective_p2p_level(P2PLevel::automatic), P2PLevel::node);
  for (P2PLevel level : kLevels) EXPECT_EQ(effective_p2p_level(level), level);
  EXPECT_EQ(level_needed_for({LinkKind::loc, 0}), P2PLevel::loc);
  EXPECT_EQ(level_needed_for({LinkKind::nv, 18}), P2PLevel::nvl);
  EXPECT_EQ(level_needed_for({LinkKind::pxb, 0}), P2PLevel::pxb);
  EXPECT_EQ(level_needed_for({LinkKind::sys, 0}), P2PLevel::sys);
  EXPECT_TRUE(p2p_allowed({LinkKind::node, 0}, P2PLevel::automatic));
  EXPECT_FALSE(p2p_allowed({LinkKind::sys, 0}, P2PLevel::automatic));
  EXPECT_TRUE(p2p_allowed({LinkKind::nv, 2}, P2PLevel::automatic));
  EXPECT_TRUE(p2p_allowed({LinkKind::loc, 0}, P2PLevel::loc));
}

}  // namespace
}  // namespace peerplan::topology
