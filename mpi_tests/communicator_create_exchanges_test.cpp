// SPDX-License-Identifier: Apache-2.0
// What Communicator::create exchanges between the ranks: the number of
// bootstrap round trips it makes (so that it cannot grow unnoticed), and a
// bad PEERPLAN_* value on one rank only, which every rank must report alike
// and promptly, not after the timeout.
#include <mpi.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <limits>
#include <string>

#include "bootstrap/collective_count.hpp"
#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "support/communicator_test_support.hpp"
#include "support/mpi_test_support.hpp"
#include "support/posed_nodes.hpp"

namespace peerplan::comm_test {
namespace {

using namespace std::chrono_literals;

// The bootstrap round trips one create() makes on this rank.
std::uint64_t exchanges_in_create(Config config) {
  const std::uint64_t before = bootstrap::collectives_made();
  auto comm = create_on_world(std::move(config));
  const std::uint64_t made = bootstrap::collectives_made() - before;
  comm->close();
  return made;
}

// The bootstrap's duplication and roll call (which gives the local rank
// the GPU choice needs), the one exchange of rank cards, and the MPI
// fallback's duplication with the barrier that names a rank missing from it.
constexpr std::uint64_t kCreateExchanges = 5;
// The shared-memory transport's own: segment name prefixes, the probe
// segment's names and its verdict; then the agreement to enable P2P.
constexpr std::uint64_t kSharedMemoryExchanges = 4;
// Several nodes: the duplication for the hierarchical route's step between nodes.
constexpr std::uint64_t kBetweenNodesExchanges = 1;

TEST(CreateExchanges, WithoutP2P) {
  Config config;
  config.disable_p2p = true;
  EXPECT_EQ(exchanges_in_create(config), kCreateExchanges);
}

TEST(CreateExchanges, OneNode) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "needs every rank on one machine");
  EXPECT_EQ(exchanges_in_create({}), kCreateExchanges + kSharedMemoryExchanges);
}

TEST(CreateExchanges, TwoPosedNodes) {
  PEERPLAN_MPI_SKIP_IF(test_size() != 4, "poses 2 nodes of 2 ranks: needs 4 ranks");
  const PoseAsNodes posed({{0, 1}, {2, 3}});
  EXPECT_EQ(exchanges_in_create({}),
            kCreateExchanges + kSharedMemoryExchanges + kBetweenNodesExchanges);
}

// Sets a variable on one rank only while alive.
class SetOnRank {
 public:
  SetOnRank(int rank, const char* variable, const char* value) : variable_(variable) {
    if (test_rank() == rank) ::setenv(variable, value, 1);
  }
  ~SetOnRank() { ::unsetenv(variable_); }
  SetOnRank(const SetOnRank&) = delete;
  SetOnRank& operator=(const SetOnRank&) = delete;

 private:
  const char* variable_;
};

// Every rank's InvalidArgument message (empty if create succeeded or threw
// something else), and how long create took on this rank.
struct CreateOutcome {
  std::string invalid_argument;
  std::string other;
  std::chrono::milliseconds took{0};
};

CreateOutcome try_create(Config config) {
  CreateOutcome outcome;
  const auto start = std::chrono::steady_clock::now();
  try {
    create_on_world(std::move(config))->close();
  } catch (const InvalidArgument& e) {
    outcome.invalid_argument = e.what();
  } catch (const std::exception& e) {
    outcome.other = e.what();
  }
  outcome.took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  return outcome;
}

TEST(CreateExchanges, BadSettingOnOneRankReachesEveryRankAtOnce) {
  Config config;
  config.timeout = 20s;  // the old behaviour: the other ranks waited this long
  const SetOnRank bad(1, "PEERPLAN_ONE_SHOT_MAX_BYTES", "lots");
  const CreateOutcome outcome = try_create(config);
  EXPECT_EQ(outcome.other, "");
  EXPECT_TRUE(names_rank(outcome.invalid_argument, 1)) << outcome.invalid_argument;
  EXPECT_FALSE(names_rank(outcome.invalid_argument, 0)) << outcome.invalid_argument;
  EXPECT_NE(outcome.invalid_argument.find("PEERPLAN_ONE_SHOT_MAX_BYTES=\"lots\""),
            std::string::npos)
      << outcome.invalid_argument;
  EXPECT_LT(outcome.took, 5s) << "create took " << outcome.took.count() << " ms";
  // Every rank raised the same message.
  EXPECT_TRUE(ranks_differing_from_rank0(fnv1a(outcome.invalid_argument)).empty())
      << outcome.invalid_argument;
}

// A field set from code that the constructor uses before the cards are
// checked (a negative count once asked for SIZE_MAX slots: std::length_error
// on that rank, a timeout on the others).
TEST(CreateExchanges, UndeclaredKeysTrackedOutOfRangeOnOneRankReachesEveryRankAtOnce) {
  PEERPLAN_MPI_SKIP_IF(test_size() < 2, "needs 2 ranks");
  for (int keys : {-1, kMaxUndeclaredKeysTracked + 1, std::numeric_limits<int>::max()}) {
    Config config;
    config.timeout = 20s;
    if (test_rank() == 1) config.undeclared_keys_tracked = keys;
    const CreateOutcome outcome = try_create(config);
    EXPECT_EQ(outcome.other, "") << keys;
    EXPECT_TRUE(names_rank(outcome.invalid_argument, 1)) << outcome.invalid_argument;
    EXPECT_NE(
        outcome.invalid_argument.find("Config::undeclared_keys_tracked is " + std::to_string(keys)),
        std::string::npos)
        << outcome.invalid_argument;
    EXPECT_LT(outcome.took, 5s) << "create took " << outcome.took.count() << " ms";
  }
}

TEST(CreateExchanges, BadSettingsOnTwoRanksAreBothNamed) {
  PEERPLAN_MPI_SKIP_IF(test_size() < 3, "needs 3 ranks");
  Config config;
  config.timeout = 20s;
  const SetOnRank bad_size(1, "PEERPLAN_ONE_SHOT_MAX_BYTES", "lots");
  const SetOnRank bad_backend(2, "PEERPLAN_FALLBACK", "pigeon");
  const CreateOutcome outcome = try_create(config);
  EXPECT_EQ(outcome.other, "");
  EXPECT_TRUE(names_rank(outcome.invalid_argument, 1)) << outcome.invalid_argument;
  EXPECT_TRUE(names_rank(outcome.invalid_argument, 2)) << outcome.invalid_argument;
  EXPECT_NE(outcome.invalid_argument.find("PEERPLAN_ONE_SHOT_MAX_BYTES"), std::string::npos);
  EXPECT_NE(outcome.invalid_argument.find("PEERPLAN_FALLBACK"), std::string::npos);
  EXPECT_LT(outcome.took, 5s) << "create took " << outcome.took.count() << " ms";
}

TEST(CreateExchanges, CreateWorksAgainAfterABadSetting) {
  {
    const SetOnRank bad(test_size() - 1, "PEERPLAN_TIMEOUT_MS", "soon");
    EXPECT_NE(try_create({}).invalid_argument, "");
  }
  const CreateOutcome outcome = try_create({});
  EXPECT_EQ(outcome.invalid_argument + outcome.other, "");
}

}  // namespace
}  // namespace peerplan::comm_test
