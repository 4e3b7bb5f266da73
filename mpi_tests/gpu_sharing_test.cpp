// SPDX-License-Identifier: Apache-2.0
// Which ranks share a GPU (src/communicator/gpu_sharing.hpp), under mpirun
// with 2, 3 and 4 ranks: the pure grouping, and the groups every rank
// derives alike from the exchanged rank cards (card_decisions.hpp). Bus ids
// are made up: no GPU is needed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "bootstrap/mpi_bootstrap.hpp"
#include "bootstrap/nodes.hpp"
#include "communicator/card_collection.hpp"
#include "communicator/card_decisions.hpp"
#include "communicator/gpu_sharing.hpp"
#include "support/mpi_test_support.hpp"

namespace {

using peerplan::communicator::group_shared_gpus;
using peerplan::communicator::SharedGpus;

// Every rank's card carries its GPU's bus id (empty: unknown); the groups
// come from the exchanged cards, as in create.
SharedGpus find_shared_gpus(peerplan::bootstrap::Bootstrap& boot, const std::string& bus_id) {
  peerplan::communicator::RankCard card;
  card.node_key = peerplan::bootstrap::detail::node_key();
  card.machine_key = peerplan::bootstrap::detail::machine_key();
  card.gpu.bus_id = bus_id;
  return peerplan::communicator::shared_gpus(peerplan::communicator::exchange_cards(boot, card));
}
using peerplan::mpi_test::world_rank;
using peerplan::mpi_test::world_size;

TEST(GpuSharing, GroupsInRankOrder) {
  const auto shared =
      group_shared_gpus({"0/B", "0/A", "0/B", "0/C", "0/A", "1/B"}, {"B", "A", "B", "C", "A", "B"});
  ASSERT_EQ(shared.groups.size(), 2u);
  EXPECT_EQ(shared.groups[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(shared.groups[1], (std::vector<int>{1, 4}));
  EXPECT_EQ(shared.text(), "ranks 0, 2 share GPU B; ranks 1, 4 share GPU A");
  EXPECT_TRUE(shared.any());
}

TEST(GpuSharing, UnknownAndDistinctGpusShareNothing) {
  EXPECT_FALSE(group_shared_gpus({"", "", "0/A"}, {"", "", "A"}).any());
  // The same bus id on two nodes is two GPUs.
  EXPECT_FALSE(group_shared_gpus({"0/A", "1/A"}, {"A", "A"}).any());
  EXPECT_FALSE(group_shared_gpus({}, {}).any());
}

TEST(GpuSharing, EveryRankFindsTheSameGroups) {
  auto boot = peerplan::bootstrap::make_mpi_bootstrap(MPI_COMM_WORLD, std::chrono::seconds(30));
  const int rank = world_rank();
  const int size = world_size();
  // One GPU per rank: nothing shared.
  EXPECT_FALSE(find_shared_gpus(*boot, "0000:0" + std::to_string(rank) + ":00.0").any());
  // Two GPUs for all ranks, dealt round-robin; the last rank's is unknown.
  const std::string mine = rank == size - 1 ? "" : (rank % 2 ? "0000:b1:00.0" : "0000:17:00.0");
  const auto shared = find_shared_gpus(*boot, mine);
  std::vector<std::vector<int>> expected;
  std::vector<int> even, odd;
  for (int r = 0; r < size - 1; ++r) (r % 2 ? odd : even).push_back(r);
  if (even.size() > 1) expected.push_back(even);
  if (odd.size() > 1) expected.push_back(odd);
  EXPECT_EQ(shared.groups, expected);
  if (!expected.empty()) {
    EXPECT_EQ(shared.gpus.front(), "0000:17:00.0");
    EXPECT_NE(shared.text().find("share GPU 0000:17:00.0"), std::string::npos) << shared.text();
  }
}

// Ranks posing as different nodes (PEERPLAN_HOST_ID) on one machine still
// share its GPUs: NCCL, which tells hosts apart by its own hash, refuses
// them, so the CUDA backend must see the sharing to pick the MPI fallback.
TEST(GpuSharing, PosedNodesOfOneMachineStillShareItsGpus) {
  const int rank = world_rank();
  ::setenv("PEERPLAN_HOST_ID", ("posed" + std::to_string(rank)).c_str(), 1);
  auto boot = peerplan::bootstrap::make_mpi_bootstrap(MPI_COMM_WORLD, std::chrono::seconds(30));
  EXPECT_EQ(boot->num_nodes(), world_size()) << "every rank poses as a node of its own";
  const auto shared = find_shared_gpus(*boot, "0000:17:00.0");
  ::unsetenv("PEERPLAN_HOST_ID");
  std::vector<int> everyone;
  for (int r = 0; r < world_size(); ++r) everyone.push_back(r);
  EXPECT_EQ(shared.groups, std::vector<std::vector<int>>{everyone});
}

}  // namespace
