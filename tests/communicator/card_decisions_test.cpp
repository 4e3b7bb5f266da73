// SPDX-License-Identifier: Apache-2.0
// The decisions of create from every rank's card, without MPI: the same
// cards give the same verdict, and the errors name the ranks and fields.
#include "communicator/card_decisions.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "communicator/cutoff_resolution.hpp"
#include "fixture_cards.hpp"
#include "communicator/machine_fingerprint.hpp"
#include "communicator/p2p_level_check.hpp"
#include "core/config_fields.hpp"
#include "peerplan/errors.hpp"
#include "routing/fingerprint.hpp"
#include "topology/pci_address.hpp"
#include "topology/topology.hpp"

namespace peerplan::communicator {
namespace {

template <class Error, class Decision>
std::string error_of(Decision&& decision) {
  try {
    decision();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CardDecisions, GoodSettingsPass) {
  EXPECT_NO_THROW(check_settings(cards_on({"a", "a", "a"})));
}

TEST(CardDecisions, SettingsErrorsNameEveryRankAndMessage) {
  auto cards = cards_on({"a", "a", "a", "a"});
  cards[1].settings_error = "PEERPLAN_ONE_SHOT_MAX_BYTES=\"lots\" is not valid";
  cards[3].settings_error = "PEERPLAN_ONE_SHOT_MAX_BYTES=\"lots\" is not valid";
  cards[2].settings_error = "PEERPLAN_FALLBACK=\"pigeon\" is not valid";
  EXPECT_EQ(error_of<InvalidArgument>([&] { check_settings(cards); }),
            "create: ranks 1, 3: PEERPLAN_ONE_SHOT_MAX_BYTES=\"lots\" is not valid; rank 2: "
            "PEERPLAN_FALLBACK=\"pigeon\" is not valid");
}

TEST(CardDecisions, DifferingAgreedFieldIsAMismatchNamingFieldAndRanks) {
  Config other;
  other.cutoffs.one_shot_max_bytes = 1024;
  std::vector<RankCard> cards{card_on("a"), card_on("a", other), card_on("a")};
  const std::string error = error_of<Mismatch>([&] { check_settings(cards); });
  EXPECT_NE(error.find("cutoffs.one_shot_max_bytes (PEERPLAN_ONE_SHOT_MAX_BYTES) is auto on "
                       "rank 0 but 1024 on rank 1"),
            std::string::npos)
      << error;
}

TEST(CardDecisions, ACardOfAnotherBuildIsNamed) {
  auto cards = cards_on({"a", "a"});
  cards[1].agreed_settings.pop_back();
  const std::string error = error_of<Mismatch>([&] { check_settings(cards); });
  EXPECT_NE(error.find("rank 1 sent"), std::string::npos) << error;
  EXPECT_NE(error.find("same peerplan build"), std::string::npos) << error;
}

TEST(CardDecisions, TuningFileErrors) {
  auto cards = cards_on({"a", "a"});
  EXPECT_NO_THROW(check_tuning_files(cards));
  cards[0].tuning_error = "t.txt line 3: bad";
  EXPECT_EQ(error_of<InvalidArgument>([&] { check_tuning_files(cards); }),
            "create: cannot use the tuning file (rank 0: t.txt line 3: bad)");
}

TEST(CardDecisions, Backend) {
  auto cards = cards_on({"a", "a"});
  EXPECT_EQ(decide_backend(Backend::host, true, cards), Backend::host);
  EXPECT_EQ(decide_backend(Backend::automatic, false, cards), Backend::host);
  EXPECT_NE(error_of<Unsupported>([&] { decide_backend(Backend::cuda, false, cards); }), "");
  cards[0].sees_gpu = true;
  EXPECT_EQ(decide_backend(Backend::automatic, true, cards), Backend::host);
  const std::string blind =
      error_of<Unsupported>([&] { decide_backend(Backend::cuda, true, cards); });
  EXPECT_NE(blind.find("rank 1: sees no GPU"), std::string::npos) << blind;
  cards[1].sees_gpu = true;
  EXPECT_EQ(decide_backend(Backend::automatic, true, cards), Backend::cuda);
}

TEST(CardDecisions, NodesFollowLowestRanks) {
  const auto cards = cards_on({"y", "x", "y", "x", "z", "z"});
  EXPECT_EQ(node_ids(cards), (std::vector<int>{0, 1, 0, 1, 2, 2}));
  EXPECT_EQ(local_ranks(cards), (std::vector<int>{0, 0, 1, 1, 0, 1}));
  const NodeLayout layout = node_layout(cards);
  EXPECT_EQ(layout.num_nodes, 3);
  EXPECT_EQ(layout.ranks_per_node, 2);
  EXPECT_EQ(layout.text, "3 nodes with 2 ranks each");
}

TEST(CardDecisions, UnevenNodes) {
  const NodeLayout layout = node_layout(cards_on({"x", "x", "x", "y"}));
  EXPECT_EQ(layout.ranks_per_node, 0);
  EXPECT_EQ(layout.text, "2 nodes with 3, 1 ranks");
  EXPECT_TRUE(layout.unfit_for_hierarchical());
  EXPECT_EQ(node_layout(cards_on({"x", "x"})).text, "1 node");
}

TEST(CardDecisions, TopologyAndGpuErrors) {
  auto cards = cards_on({"a", "a"});
  EXPECT_NO_THROW(check_topologies(cards));
  EXPECT_NO_THROW(check_gpus(cards));
  cards[1].topology_error = "no such file";
  cards[0].gpu_error = "device 3 does not exist";
  EXPECT_EQ(error_of<InvalidArgument>([&] { check_topologies(cards); }),
            "create: cannot load the topology (rank 1: no such file)");
  EXPECT_EQ(error_of<InvalidArgument>([&] { check_gpus(cards); }),
            "create: cannot use the GPU as configured (rank 0: device 3 does not exist)");
}

TEST(CardDecisions, SharedGpusAcrossPosedNodesOfOneMachine) {
  auto cards = cards_on({"n0", "n0", "n1", "n1"});
  const char* buses[] = {"0000:17:00.0", "0000:18:00.0", "0000:17:00.0", "0000:19:00.0"};
  for (int r = 0; r < 4; ++r) cards[r].gpu.bus_id = buses[r];
  const SharedGpus shared = shared_gpus(cards);
  ASSERT_EQ(shared.groups.size(), 1u);
  EXPECT_EQ(shared.groups[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(shared.text(), "ranks 0, 2 share GPU 0000:17:00.0");
  // Ranks 0 and 2 are both local rank 0: one group between nodes.
  EXPECT_TRUE(shared_gpus(cards, true).any());
  cards[2].machine_key = "another machine";
  EXPECT_FALSE(shared_gpus(cards).any());
}

// Two nodes of one GPU each, two ranks on each: the job shares GPUs, so no
// tuning entry may apply, on several nodes as on one (the fingerprint's
// "shared"); the same bus id on two machines is not sharing.
TEST(CardDecisions, TheFingerprintSaysSharedOnSeveralNodesToo) {
  auto cards = cards_on({"n0", "n0", "n1", "n1"});
  for (int r = 0; r < 4; ++r) {
    cards[r].gpu.bus_id = "0000:17:00.0";
    cards[r].machine_key = r < 2 ? "machine 0" : "machine 1";
  }
  const std::string fingerprint = machine_fingerprint(cards, 2, Backend::cuda);
  EXPECT_EQ(fingerprint, "cuda nodes=2 ranks=4 shared");
  EXPECT_TRUE(routing::fingerprint_says_shared(fingerprint));
  cards[1].gpu.bus_id = "0000:18:00.0";
  cards[3].gpu.bus_id = "0000:18:00.0";
  EXPECT_EQ(machine_fingerprint(cards, 2, Backend::cuda), "cuda nodes=2 ranks=4");
  EXPECT_EQ(machine_fingerprint(cards, 2, Backend::host), "host nodes=2 ranks=4");
}

TEST(CardDecisions, SharedGpusOnlyWithinGroupsNeedTheSameLocalRank) {
  auto cards = cards_on({"n0", "n0", "n1", "n1"});
  const char* buses[] = {"0000:17:00.0", "0000:18:00.0", "0000:18:00.0", "0000:17:00.0"};
  for (int r = 0; r < 4; ++r) cards[r].gpu.bus_id = buses[r];
  EXPECT_TRUE(shared_gpus(cards).any());
  EXPECT_FALSE(shared_gpus(cards, true).any());
}

TEST(CardDecisions, TuningAgreement) {
  const Config config;
  const std::string none = tuning_entry_effect(config, nullptr);
  routing::TuningEntry entry;
  entry.fingerprint = "fp";
  entry.cutoffs.one_shot_max_bytes = 4096;
  const std::string effect = tuning_entry_effect(config, &entry);
  ASSERT_NE(effect, none);
  auto cards = cards_on({"a", "a", "a"});
  for (auto& card : cards) card.tuning_entries = {{"fp", effect}};
  EXPECT_NO_THROW(check_tuning_agreement(cards, "fp", true, none));
  // A file without an entry for this fingerprint changes nothing.
  cards[2].tuning_entries = {{"other", effect}};
  cards[2].tuning_file = "mine.txt";
  const std::string error =
      error_of<Mismatch>([&] { check_tuning_agreement(cards, "fp", true, none); });
  EXPECT_NE(error.find("create: rank 2 resolved other route cutoffs"), std::string::npos) << error;
  EXPECT_NE(error.find("tuning file 'mine.txt'"), std::string::npos) << error;
  // Not applied (ranks share a GPU): every rank resolves the defaults.
  EXPECT_NO_THROW(check_tuning_agreement(cards, "fp", false, none));
}

TEST(CardDecisions, AnExplicitCutoffHidesTheEntrysValue) {
  Config config;
  config.cutoffs.one_shot_max_bytes = 1024;
  routing::TuningEntry entry;
  entry.cutoffs.one_shot_max_bytes = 4096;
  EXPECT_EQ(tuning_entry_effect(config, &entry), tuning_entry_effect(config, nullptr));
}

TEST(CardDecisions, FingerprintOfTheHostBackendNeedsNoGpu) {
  const auto cards = cards_on({"a", "a"});
  EXPECT_EQ(machine_fingerprint(cards, 1, Backend::host),
            machine_fingerprint(cards_on({"b", "b"}), 1, Backend::host));
}

// Two sockets: GPUs 03, 04 below one switch of socket 0, 83, 84 on socket 1.
std::vector<RankCard> cards_with_gpus(const std::vector<std::string>& nodes,
                                      const std::vector<std::string>& buses) {
  auto cards = cards_in("8gpu-two-sockets.xml", buses);
  for (std::size_t r = 0; r < cards.size(); ++r) cards[r].node_key = nodes[r];
  return cards;
}

TEST(CardDecisions, P2PLevelAcrossSocketsIsAnObstacleByDefault) {
  const auto cards =
      cards_with_gpus({"a", "a", "a"}, {"0000:03:00.0", "0000:04:00.0", "0000:83:00.0"});
  const auto nodes = node_ids(cards);
  const auto verdict = p2p_level_verdict(cards, nodes, P2PLevel::automatic);
  EXPECT_EQ(verdict.pairs, 3);
  EXPECT_FALSE(verdict.unknown_links.has_value());
  ASSERT_TRUE(verdict.obstacle.has_value());
  EXPECT_EQ(verdict.obstacle->rfind("ranks 0 and 2: GPUs 0000:03:00.0 and 0000:83:00.0 are "
                                    "linked through SYS (",
                                    0),
            0u)
      << *verdict.obstacle;
  EXPECT_FALSE(p2p_level_verdict(cards, nodes, P2PLevel::sys).obstacle.has_value());
}

TEST(CardDecisions, P2PLevelPairsStayWithinANode) {
  // The cross-socket GPU is on another node: no pair crosses the sockets.
  const auto cards =
      cards_with_gpus({"a", "a", "b"}, {"0000:03:00.0", "0000:04:00.0", "0000:83:00.0"});
  const auto verdict = p2p_level_verdict(cards, node_ids(cards), P2PLevel::automatic);
  EXPECT_FALSE(verdict.obstacle.has_value()) << *verdict.obstacle;
  EXPECT_EQ(verdict.pairs, 1);
}

TEST(CardDecisions, P2PLevelWithAGpuTheTopologyDoesNotListIsUnknownNotBlocked) {
  auto cards = cards_with_gpus({"a", "a"}, {"0000:03:00.0", "0000:04:00.0"});
  cards[1].gpu_location.reset();
  for (P2PLevel level : {P2PLevel::automatic, P2PLevel::sys}) {
    const auto verdict = p2p_level_verdict(cards, node_ids(cards), level);
    EXPECT_FALSE(verdict.obstacle.has_value()) << *verdict.obstacle;
    EXPECT_TRUE(verdict.unknown_links.has_value());
  }
}

TEST(CardDecisions, P2PLevelSetOnPurposeRefusesAGpuTheTopologyDoesNotList) {
  // Across sockets (03 and 83), but rank 1's topology lacks its GPU: an
  // explicit level must not let the unknown link through.
  auto cards = cards_with_gpus({"a", "a"}, {"0000:03:00.0", "0000:83:00.0"});
  cards[1].gpu_location.reset();
  for (P2PLevel level : {P2PLevel::nvl, P2PLevel::pxb, P2PLevel::node}) {
    const auto verdict = p2p_level_verdict(cards, node_ids(cards), level);
    ASSERT_TRUE(verdict.obstacle.has_value()) << to_string(level);
    EXPECT_NE(verdict.obstacle->find("does not list GPU 0000:83:00.0 (rank 1)"), std::string::npos)
        << *verdict.obstacle;
    EXPECT_NE(verdict.obstacle->find("set PEERPLAN_TOPO_FILE"), std::string::npos)
        << *verdict.obstacle;
    EXPECT_NE(verdict.obstacle->find("PEERPLAN_P2P_LEVEL=SYS or auto to allow it"),
              std::string::npos)
        << *verdict.obstacle;
  }
}

TEST(CardDecisions, TopologyFileLackingTheGpuNamesTheFileAndTheGpu) {
  const std::string at_pxb =
      topology_file_lacks_gpu("/etc/topo.xml", "00000000:83:00.0", 2, P2PLevel::pxb);
  EXPECT_EQ(at_pxb.rfind("Config::topology_file / PEERPLAN_TOPO_FILE '/etc/topo.xml' does not "
                         "list this rank's GPU 0000:83:00.0 (it lists 2 GPU(s)",
                         0),
            0u)
      << at_pxb;
  EXPECT_NE(at_pxb.find("count as beyond PEERPLAN_P2P_LEVEL=PXB"), std::string::npos) << at_pxb;
  EXPECT_NE(at_pxb.find("lstopo --of xml"), std::string::npos) << at_pxb;
  const std::string at_auto =
      topology_file_lacks_gpu("/etc/topo.xml", "0000:83:00.0", 2, P2PLevel::automatic);
  EXPECT_NE(at_auto.find("not checked against PEERPLAN_P2P_LEVEL=auto"), std::string::npos)
      << at_auto;
}

TEST(CardDecisions, P2PLevelAtTwoRanksBelowOneSwitchHasNoObstacle) {
  const auto cards = cards_in("8gpu-two-sockets.xml", {"0000:03:00.0", "0000:04:00.0"});
  const auto verdict = p2p_level_verdict(cards, node_ids(cards), P2PLevel::automatic);
  EXPECT_EQ(verdict.pairs, 1);
  EXPECT_FALSE(verdict.obstacle.has_value()) << *verdict.obstacle;
  EXPECT_FALSE(verdict.unknown_links.has_value()) << *verdict.unknown_links;
}

TEST(CardDecisions, P2PLevelObstacleTellsWhichLevelWouldAllowIt) {
  const auto cards = cards_in("8gpu-two-sockets.xml",
                              {"0000:03:00.0", "0000:04:00.0", "0000:83:00.0", "0000:84:00.0"});
  const auto verdict = p2p_level_verdict(cards, node_ids(cards), P2PLevel::automatic);
  EXPECT_EQ(verdict.pairs, 6);
  ASSERT_TRUE(verdict.obstacle.has_value());
  EXPECT_NE(verdict.obstacle->find("set PEERPLAN_P2P_LEVEL=SYS"), std::string::npos)
      << *verdict.obstacle;
}

TEST(CardDecisions, P2PLevelRanksSharingOneGpuPassEvenAtLoc) {
  const auto cards =
      cards_in("2gpu-one-switch.xml", {"0000:43:00.0", "0000:43:00.0", "0000:43:00.0"});
  const auto verdict = p2p_level_verdict(cards, node_ids(cards), P2PLevel::loc);
  EXPECT_FALSE(verdict.obstacle.has_value()) << *verdict.obstacle;
  EXPECT_EQ(verdict.allowed_pairs, 3);
}

TEST(CardDecisions, P2PLevelNvlinkEndsMakeTheH200PairNv18) {
  // CUDA's spelling of the bus ids; 18 NVLinks from each GPU to the other.
  const std::vector<std::string> buses = {"00000000:00:06.0", "00000000:00:07.0"};
  auto cards = cards_in("2gpu-h200-vm.xml", buses);
  const auto pcie_only = p2p_level_verdict(cards, node_ids(cards), P2PLevel::pix);
  ASSERT_TRUE(pcie_only.obstacle.has_value());
  EXPECT_EQ(pcie_only.obstacle->rfind("ranks 0 and 1: GPUs 0000:00:06.0 and 0000:00:07.0 are "
                                      "linked through PHB (",
                                      0),
            0u)
      << *pcie_only.obstacle;
  for (int r = 0; r < 2; ++r)
    cards[r].gpu.nvlinks.gpu_peers.assign(18, *topology::PciAddress::parse(buses[1 - r]));
  const auto at_pix = p2p_level_verdict(cards, node_ids(cards), P2PLevel::pix);
  EXPECT_FALSE(at_pix.obstacle.has_value()) << *at_pix.obstacle;
  const auto at_loc = p2p_level_verdict(cards, node_ids(cards), P2PLevel::loc);
  ASSERT_TRUE(at_loc.obstacle.has_value());
  EXPECT_EQ(at_loc.obstacle->rfind("ranks 0 and 1: GPUs 0000:00:06.0 and 0000:00:07.0 are "
                                   "linked through NV18 (18 NVLinks)",
                                   0),
            0u)
      << *at_loc.obstacle;
}

TEST(CardDecisions, P2PLevelLocRefusesDifferentGpusWhateverLinksThem) {
  // Neither GPU is placed (no topology lists them): still two GPUs.
  auto cards = cards_on({"a", "a"});
  cards[0].gpu.bus_id = "0000:43:00.0";
  cards[1].gpu.bus_id = "0000:44:00.0";
  const auto verdict = p2p_level_verdict(cards, node_ids(cards), P2PLevel::loc);
  ASSERT_TRUE(verdict.obstacle.has_value());
  EXPECT_EQ(verdict.obstacle->rfind(
                "ranks 0 and 1 use different GPUs (0000:43:00.0 and 0000:44:00.0)", 0),
            0u)
      << *verdict.obstacle;
  EXPECT_FALSE(p2p_level_verdict(cards, node_ids(cards), P2PLevel::automatic).obstacle);
  EXPECT_FALSE(p2p_level_verdict(cards, node_ids(cards), P2PLevel::sys).obstacle);
  EXPECT_TRUE(p2p_level_verdict(cards, node_ids(cards), P2PLevel::pix).obstacle);
}

TEST(CardDecisions, P2PLevelTheMostTellingNodeVerdictWins) {
  // Node "a" has a pair of unknown links, node "b" a pair across sockets:
  // the obstacle wins, whatever the node order.
  auto cards = cards_in("8gpu-two-sockets.xml",
                        {"0000:03:00.0", "0000:04:00.0", "0000:03:00.0", "0000:83:00.0"});
  cards[0].node_key = cards[1].node_key = "a";
  cards[2].node_key = cards[3].node_key = "b";
  cards[1].gpu_location.reset();
  const auto verdict = p2p_level_verdict(cards, node_ids(cards), P2PLevel::automatic);
  ASSERT_TRUE(verdict.obstacle.has_value());
  EXPECT_EQ(verdict.obstacle->rfind("ranks 2 and 3: GPUs 0000:03:00.0 and 0000:83:00.0", 0), 0u)
      << *verdict.obstacle;
}

TEST(CardDecisions, GpuLocationsSurviveTheCardEncoding) {
  const auto cards = cards_with_gpus({"a"}, {"0000:83:00.0"});
  ASSERT_TRUE(cards[0].gpu_location.has_value());
  ASSERT_FALSE(cards[0].gpu_location->bridges.empty());
  const RankCard back = decode_rank_card(encode_rank_card(cards[0]));
  ASSERT_TRUE(back.gpu_location.has_value());
  EXPECT_EQ(back.gpu_location->bus_id(), "0000:83:00.0");
  EXPECT_EQ(back.gpu_location->switches(), cards[0].gpu_location->switches());
  EXPECT_EQ(back.gpu_location->host_bridge, cards[0].gpu_location->host_bridge);
  EXPECT_EQ(back.gpu_location->numa_node, cards[0].gpu_location->numa_node);
  EXPECT_EQ(back.gpu_location->pcie_mb_per_s, 31508u);
  EXPECT_EQ(back, cards[0]);
}

TEST(CardDecisions, CudaFingerprintFromTheCardsGpus) {
  auto cards = cards_with_gpus({"a", "a"}, {"0000:03:00.0", "0000:83:00.0"});
  for (auto& card : cards) card.gpu.name = "NVIDIA H200";
  const std::string located = machine_fingerprint(cards, 1, Backend::cuda);
  EXPECT_NE(located.find("NVIDIA H200"), std::string::npos) << located;
  EXPECT_EQ(located, machine_fingerprint(cards, 1, Backend::cuda));
  // A rank whose GPU its topology does not list: links unknown, another print.
  cards[1].gpu_location.reset();
  EXPECT_NE(machine_fingerprint(cards, 1, Backend::cuda), located);
  // Two ranks on one GPU say so.
  cards[1].gpu.bus_id = cards[0].gpu.bus_id;
  EXPECT_TRUE(routing::fingerprint_says_shared(machine_fingerprint(cards, 1, Backend::cuda)));
}

}  // namespace
}  // namespace peerplan::communicator
