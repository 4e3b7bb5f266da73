// SPDX-License-Identifier: Apache-2.0
// communicator::gather_p2p_level_verdict under mpirun (2, 3, 4 ranks on
// one host, no GPU): each rank pretends to drive a GPU of an hwloc fixture
// (tests/fixtures/topology) by passing its bus id, and every rank must get
// the same verdict, naming the pair the fixture's matrix says is too far.
#include <mpi.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/mpi_bootstrap.hpp"
#include "communicator/p2p_level_check.hpp"
#include "support/mpi_test_support.hpp"

namespace {

using peerplan::Config;
using peerplan::P2PLevel;
using peerplan::bootstrap::Bootstrap;
using peerplan::communicator::gather_p2p_level_verdict;
using peerplan::communicator::p2p_level_obstacle;
using peerplan::mpi_test::world_rank;
using peerplan::mpi_test::world_size;
using peerplan::topology::NvlinkEnds;
using peerplan::topology::PciAddress;

std::string fixture(const std::string& name) {
  return std::string(PEERPLAN_TEST_FIXTURES) + "/topology/" + name;
}

std::unique_ptr<Bootstrap> make_bootstrap() {
  return peerplan::bootstrap::make_mpi_bootstrap(MPI_COMM_WORLD, std::chrono::seconds(30));
}

Config config_for(const std::string& topology_file, P2PLevel level) {
  Config config;
  config.topology_file = topology_file;
  config.p2p_level = level;
  return config;
}

// Whether rank 0 holds the same text.
bool same_as_rank_0(const std::string& text) {
  unsigned long size = text.size();
  MPI_Bcast(&size, 1, MPI_UNSIGNED_LONG, 0, peerplan::mpi_test::test_comm());
  std::string root(size, '\0');
  if (world_rank() == 0) root = text;
  MPI_Bcast(root.data(), static_cast<int>(size), MPI_CHAR, 0, peerplan::mpi_test::test_comm());
  return root == text;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

TEST(P2PLevelCheck, TwoSocketsBlockAcrossSocketsByDefault) {
  // Ranks 0, 1 below one switch of socket 0 (PIX), ranks 2, 3 on socket 1 (SYS to 0, 1).
  const std::array<const char*, 4> gpus = {"0000:03:00.0", "0000:04:00.0", "0000:83:00.0",
                                           "0000:84:00.0"};
  auto bootstrap = make_bootstrap();
  const std::string mine = gpus[world_rank() % 4];
  const auto by_default = gather_p2p_level_verdict(
      *bootstrap, config_for(fixture("8gpu-two-sockets.xml"), P2PLevel::automatic), mine, {});
  const int n = world_size();
  EXPECT_EQ(by_default.pairs, n * (n - 1) / 2);
  EXPECT_FALSE(by_default.unknown_links.has_value()) << *by_default.unknown_links;
  // No ASSERT before a collective: a rank leaving the test early would hang the others.
  const std::string obstacle = by_default.obstacle.value_or("");
  if (n == 2) {
    EXPECT_FALSE(by_default.obstacle.has_value()) << obstacle;
  } else {
    EXPECT_TRUE(starts_with(obstacle,
                            "ranks 0 and 2: GPUs 0000:03:00.0 and 0000:83:00.0 are linked "
                            "through SYS ("))
        << obstacle;
    EXPECT_NE(obstacle.find("set PEERPLAN_P2P_LEVEL=SYS"), std::string::npos) << obstacle;
  }
  EXPECT_TRUE(same_as_rank_0(obstacle)) << obstacle;
  EXPECT_TRUE(same_as_rank_0(by_default.summary)) << by_default.summary;

  const auto at_sys = p2p_level_obstacle(
      *bootstrap, config_for(fixture("8gpu-two-sockets.xml"), P2PLevel::sys), mine, {});
  EXPECT_FALSE(at_sys.has_value()) << *at_sys;
}

TEST(P2PLevelCheck, RanksSharingOneGpuPassEvenAtLoc) {
  auto bootstrap = make_bootstrap();
  const auto verdict = gather_p2p_level_verdict(
      *bootstrap, config_for(fixture("2gpu-one-switch.xml"), P2PLevel::loc), "0000:43:00.0", {});
  EXPECT_FALSE(verdict.obstacle.has_value()) << *verdict.obstacle;
  EXPECT_EQ(verdict.allowed_pairs, world_size() * (world_size() - 1) / 2);
}

TEST(P2PLevelCheck, NvlinkEndsMakeTheH200PairNv18) {
  // CUDA's spelling of the bus ids; 18 NVLinks from each GPU to the other.
  const std::array<const char*, 2> gpus = {"00000000:00:06.0", "00000000:00:07.0"};
  const int me = world_rank() % 2;
  NvlinkEnds ends;
  ends.gpu_peers.assign(18, *PciAddress::parse(gpus[1 - me]));
  auto bootstrap = make_bootstrap();
  const std::string vm = fixture("2gpu-h200-vm.xml");

  const auto at_pix_pcie_only =
      p2p_level_obstacle(*bootstrap, config_for(vm, P2PLevel::pix), gpus[me], {});
  ASSERT_TRUE(at_pix_pcie_only.has_value());
  EXPECT_TRUE(starts_with(*at_pix_pcie_only,
                          "ranks 0 and 1: GPUs 0000:00:06.0 and 0000:00:07.0 are linked "
                          "through PHB ("))
      << *at_pix_pcie_only;

  const auto at_pix = p2p_level_obstacle(*bootstrap, config_for(vm, P2PLevel::pix), gpus[me], ends);
  EXPECT_FALSE(at_pix.has_value()) << *at_pix;
  const auto at_loc = p2p_level_obstacle(*bootstrap, config_for(vm, P2PLevel::loc), gpus[me], ends);
  ASSERT_TRUE(at_loc.has_value());
  EXPECT_TRUE(starts_with(*at_loc,
                          "ranks 0 and 1: GPUs 0000:00:06.0 and 0000:00:07.0 are linked "
                          "through NV18 (18 NVLinks)"))
      << *at_loc;
}

TEST(P2PLevelCheck, AGpuTheTopologyDoesNotListIsNoObstacle) {
  // The last rank's GPU is not in the file: its links are unknown.
  const std::array<const char*, 3> listed = {"0000:43:00.0", "0000:44:00.0", "0000:43:00.0"};
  const int last = world_size() - 1;
  const std::string mine = world_rank() == last ? "0000:f1:00.0" : listed[world_rank() % 3];
  auto bootstrap = make_bootstrap();
  const auto verdict = gather_p2p_level_verdict(
      *bootstrap, config_for(fixture("2gpu-one-switch.xml"), P2PLevel::automatic), mine, {});
  EXPECT_FALSE(verdict.obstacle.has_value()) << *verdict.obstacle;
  EXPECT_EQ(verdict.unknown_pairs, last);
  ASSERT_TRUE(verdict.unknown_links.has_value());
  EXPECT_NE(verdict.unknown_links->find("rank " + std::to_string(last) + " (0000:f1:00.0)"),
            std::string::npos)
      << *verdict.unknown_links;
}

TEST(P2PLevelCheck, ATopologyThatCannotLoadLeavesLinksUnknown) {
  const std::string missing = "/nonexistent/peerplan-p2p-level-test.xml";
  const std::string mine = world_rank() % 2 == 0 ? "0000:43:00.0" : "0000:44:00.0";
  auto bootstrap = make_bootstrap();
  const auto verdict =
      gather_p2p_level_verdict(*bootstrap, config_for(missing, P2PLevel::automatic), mine, {});
  EXPECT_FALSE(verdict.obstacle.has_value()) << *verdict.obstacle;
  ASSERT_TRUE(verdict.unknown_links.has_value());
  EXPECT_TRUE(starts_with(*verdict.unknown_links, "the topology could not be loaded ("))
      << *verdict.unknown_links;
  // At LOC two different GPUs are too far whatever links them.
  const auto at_loc = p2p_level_obstacle(*bootstrap, config_for(missing, P2PLevel::loc), mine, {});
  ASSERT_TRUE(at_loc.has_value());
  EXPECT_TRUE(starts_with(*at_loc,
                          "ranks 0 and 1 use different GPUs (0000:43:00.0 and "
                          "0000:44:00.0)"))
      << *at_loc;
}

TEST(P2PLevelCheck, RanksThatSeeDifferentTopologiesAgreeOnTheObstacle) {
  // Rank 0 cannot load its topology file, the others can: rank 0 alone
  // would see no obstacle, yet every rank must get the others' verdict.
  const std::array<const char*, 4> gpus = {"0000:03:00.0", "0000:83:00.0", "0000:04:00.0",
                                           "0000:84:00.0"};
  const std::string file = world_rank() == 0 ? "/nonexistent/peerplan-p2p-level-test.xml"
                                             : fixture("8gpu-two-sockets.xml");
  auto bootstrap = make_bootstrap();
  const auto verdict = gather_p2p_level_verdict(*bootstrap, config_for(file, P2PLevel::node),
                                                gpus[world_rank() % 4], {});
  const std::string obstacle = verdict.obstacle.value_or("");
  EXPECT_TRUE(starts_with(obstacle,
                          "ranks 0 and 1: GPUs 0000:03:00.0 and 0000:83:00.0 are linked "
                          "through SYS ("))
      << obstacle;
  EXPECT_TRUE(same_as_rank_0(obstacle));
  EXPECT_TRUE(same_as_rank_0(verdict.summary));
}

}  // namespace
