// SPDX-License-Identifier: Apache-2.0
// The MPI bootstrap (src/bootstrap/) under mpirun with 2, 3 and 4 ranks.
#include <mpi.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/fail_together.hpp"
#include "bootstrap/launch_check.hpp"
#include "bootstrap/mpi_bootstrap.hpp"
#include "bootstrap/nodes.hpp"
#include "core/fault_injection.hpp"
#include "peerplan/config.hpp"
#include "peerplan/errors.hpp"
#include "support/fault_test_support.hpp"
#include "support/mpi_test_support.hpp"

namespace {

using peerplan::SystemError;
using peerplan::Timeout;
using peerplan::bootstrap::Blob;
using peerplan::bootstrap::Bootstrap;
using peerplan::bootstrap::describe_ranks;
using peerplan::bootstrap::gather_failures;
using peerplan::bootstrap::make_mpi_bootstrap;
using peerplan::bootstrap::run_together;
using peerplan::mpi_test::world_rank;
using peerplan::mpi_test::world_size;
using namespace std::chrono_literals;

// Short enough to keep the timeout tests fast, long enough that a loaded,
// oversubscribed CI machine never trips it in the tests that must succeed.
constexpr auto kTestTimeout = 500ms;
constexpr auto kGenerousTimeout = 30s;

Blob text_blob(const std::string& text) {
  Blob blob(text.size());
  std::memcpy(blob.data(), text.data(), text.size());
  return blob;
}

std::string blob_text(const Blob& blob) {
  return std::string(reinterpret_cast<const char*>(blob.data()), blob.size());
}

// Rank r's allgather contribution: r*r*37 bytes (rank 0's is empty) of a
// pattern that depends on rank and position; rank 1's also crosses the
// eager/rendezvous switch of common MPI transports.
Blob pattern_blob(int rank) {
  const std::size_t bytes = rank == 1 ? 300'000 : static_cast<std::size_t>(rank * rank * 37);
  Blob blob(bytes);
  for (std::size_t i = 0; i < bytes; ++i) {
    blob[i] = static_cast<std::byte>((rank * 131 + i * 7) & 0xff);
  }
  return blob;
}

// A communicator of the test's own for synchronising ranks outside the
// bootstrap under test.
class Dup {
 public:
  explicit Dup(MPI_Comm comm) { MPI_Comm_dup(comm, &comm_); }
  ~Dup() { MPI_Comm_free(&comm_); }
  Dup(const Dup&) = delete;
  Dup& operator=(const Dup&) = delete;
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

template <typename T>
std::vector<T> mpi_allgather(T value) {
  std::vector<T> all(world_size());
  MPI_Allgather(&value, sizeof(T), MPI_BYTE, all.data(), sizeof(T), MPI_BYTE, MPI_COMM_WORLD);
  return all;
}

TEST(MpiBootstrap, RanksSizesAndNodesMatchMpi) {
  auto bootstrap = make_mpi_bootstrap(MPI_COMM_WORLD, kGenerousTimeout);
  EXPECT_EQ(bootstrap->rank(), world_rank());
  EXPECT_EQ(bootstrap->size(), world_size());

  // Independent expectation: ranks on the same host share a node; nodes
  // are numbered in the order of their lowest rank; the local rank counts
  // the lower ranks of the same node.
  struct Info {
    char host[MPI_MAX_PROCESSOR_NAME];
    int node_id, num_nodes, local_rank, local_size;
  } mine{};
  int length = 0;
  MPI_Get_processor_name(mine.host, &length);
  mine.node_id = bootstrap->node_id();
  mine.num_nodes = bootstrap->num_nodes();
  mine.local_rank = bootstrap->local_rank();
  mine.local_size = bootstrap->local_size();
  const std::vector<Info> all = mpi_allgather(mine);

  std::map<std::string, int> node_of_host;
  std::vector<int> count_on_node;
  std::vector<int> expected_local_rank(world_size());
  for (int r = 0; r < world_size(); ++r) {
    auto [it, fresh] = node_of_host.emplace(all[r].host, static_cast<int>(node_of_host.size()));
    if (fresh) count_on_node.push_back(0);
    expected_local_rank[r] = count_on_node[it->second]++;
  }
  for (int r = 0; r < world_size(); ++r) {
    const int node = node_of_host.at(all[r].host);
    EXPECT_EQ(all[r].node_id, node) << "rank " << r;
    EXPECT_EQ(all[r].num_nodes, static_cast<int>(node_of_host.size())) << "rank " << r;
    EXPECT_EQ(all[r].local_rank, expected_local_rank[r]) << "rank " << r;
    EXPECT_EQ(all[r].local_size, count_on_node[node]) << "rank " << r;
  }
}

TEST(MpiBootstrap, WorksOnASubCommunicatorNotTheWorld) {
  // Even and odd ranks form two communicators; each bootstrap must see its
  // own half only (it must not fall back to MPI_COMM_WORLD anywhere).
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() % 2, world_rank(), &half);
  int half_rank = 0;
  int half_size = 0;
  MPI_Comm_rank(half, &half_rank);
  MPI_Comm_size(half, &half_size);
  {
    auto bootstrap = make_mpi_bootstrap(half, kGenerousTimeout);
    EXPECT_EQ(bootstrap->rank(), half_rank);
    EXPECT_EQ(bootstrap->size(), half_size);
    EXPECT_LE(bootstrap->local_size(), half_size);
    const int me = world_rank();
    const std::vector<Blob> all =
        bootstrap->allgather({reinterpret_cast<const std::byte*>(&me), sizeof me});
    ASSERT_EQ(static_cast<int>(all.size()), half_size);
    for (int i = 0; i < half_size; ++i) {
      int world = -1;
      ASSERT_EQ(all[i].size(), sizeof world);
      std::memcpy(&world, all[i].data(), sizeof world);
      EXPECT_EQ(world, 2 * i + world_rank() % 2) << "half rank " << i;
    }
  }
  MPI_Comm_free(&half);
}

TEST(MpiBootstrap, AllgatherOfBlobsOfDifferentSizesIncludingEmpty) {
  auto bootstrap = make_mpi_bootstrap(MPI_COMM_WORLD, kGenerousTimeout);
  for (int round = 0; round < 3; ++round) {  // repeated calls use fresh tags
    const std::vector<Blob> all = bootstrap->allgather(pattern_blob(world_rank() + round));
    ASSERT_EQ(static_cast<int>(all.size()), world_size());
    for (int r = 0; r < world_size(); ++r) {
      EXPECT_EQ(all[r], pattern_blob(r + round)) << "round " << round << ", blob of rank " << r;
    }
  }
  EXPECT_TRUE(pattern_blob(0).empty());  // the empty case is really exercised
}

TEST(MpiBootstrap, LocalAllgatherIsIndexedByLocalRankWithinTheNode) {
  auto bootstrap = make_mpi_bootstrap(MPI_COMM_WORLD, kGenerousTimeout);
  const int me = world_rank();
  const std::vector<Blob> local =
      bootstrap->local_allgather({reinterpret_cast<const std::byte*>(&me), sizeof me});
  ASSERT_EQ(static_cast<int>(local.size()), bootstrap->local_size());

  const std::vector<int> node_of = mpi_allgather(bootstrap->node_id());
  std::vector<int> expected;  // world ranks of my node, ascending
  for (int r = 0; r < world_size(); ++r) {
    if (node_of[r] == bootstrap->node_id()) expected.push_back(r);
  }
  ASSERT_EQ(local.size(), expected.size());
  for (std::size_t i = 0; i < local.size(); ++i) {
    int world = -1;
    ASSERT_EQ(local[i].size(), sizeof world);
    std::memcpy(&world, local[i].data(), sizeof world);
    EXPECT_EQ(world, expected[i]) << "local rank " << i;
  }
}

TEST(MpiBootstrap, BroadcastFromEveryRoot) {
  auto bootstrap = make_mpi_bootstrap(MPI_COMM_WORLD, kGenerousTimeout);
  for (int root = 0; root < world_size(); ++root) {
    // Non-roots pass blobs of other sizes and contents: they must be ignored.
    const std::string sent = world_rank() == root
                                 ? "from root " + std::to_string(root) + std::string(root * 10, '*')
                                 : "ignored " + std::to_string(world_rank());
    const Blob got = bootstrap->broadcast(text_blob(sent), root);
    EXPECT_EQ(blob_text(got), "from root " + std::to_string(root) + std::string(root * 10, '*'));
  }
  const Blob empty = bootstrap->broadcast(world_rank() == 0 ? Blob{} : text_blob("x"), 0);
  EXPECT_TRUE(empty.empty());
  EXPECT_THROW(bootstrap->broadcast({}, world_size()), peerplan::InvalidArgument);
  EXPECT_THROW(bootstrap->broadcast({}, -1), peerplan::InvalidArgument);
}

TEST(MpiBootstrap, BarrierHoldsEveryRankUntilTheLastArrives) {
  auto bootstrap = make_mpi_bootstrap(MPI_COMM_WORLD, kGenerousTimeout);
  bootstrap->barrier();  // everyone is here before the clock starts
  const bool late = world_rank() == world_size() - 1;
  if (late) std::this_thread::sleep_for(500ms);
  const auto start = std::chrono::steady_clock::now();
  bootstrap->barrier();
  const auto waited = std::chrono::steady_clock::now() - start;
  if (!late) {
    EXPECT_GE(waited, 250ms) << "left the barrier before the late rank arrived";
  }
}

TEST(MpiBootstrap, AgreementWithOneFailingRank) {
  auto bootstrap = make_mpi_bootstrap(MPI_COMM_WORLD, kGenerousTimeout);
  EXPECT_TRUE(bootstrap->agree(true));
  for (int failing = 0; failing < world_size(); ++failing) {
    const bool ok = world_rank() != failing;
    EXPECT_FALSE(bootstrap->agree(ok)) << "rank " << failing << " failed";
  }
  EXPECT_FALSE(bootstrap->agree(world_rank() % 2 == 0));
}

TEST(FailTogether, EveryRankGetsTheSameFailuresNamingEachFailingRank) {
  auto bootstrap = make_mpi_bootstrap(MPI_COMM_WORLD, kGenerousTimeout);
  EXPECT_FALSE(gather_failures(*bootstrap, std::nullopt).has_value());
  for (int failing = 0; failing < world_size(); ++failing) {
    const auto failures = gather_failures(*bootstrap, world_rank() == failing
                                                          ? std::optional<std::string>("disk full")
                                                          : std::nullopt);
    ASSERT_TRUE(failures.has_value());
    EXPECT_EQ(failures->ranks, std::vector<int>{failing});
    EXPECT_EQ(failures->message, "rank " + std::to_string(failing) + ": disk full");
  }
  // The same message from several ranks is said once, with its ranks; the
  // distinct ones follow in order of the first rank that reported each.
  std::vector<int> odd;
  for (int r = 1; r < world_size(); r += 2) odd.push_back(r);
  const bool is_odd = world_rank() % 2 == 1;
  const auto failures =
      gather_failures(*bootstrap, is_odd ? std::optional<std::string>(world_rank() == 1 ? "A" : "B")
                                         : std::nullopt);
  ASSERT_TRUE(failures.has_value());
  EXPECT_EQ(failures->ranks, odd);
  EXPECT_EQ(failures->message, world_size() == 4 ? "rank 1: A; rank 3: B" : "rank 1: A");
  const auto same = gather_failures(*bootstrap, std::optional<std::string>("bad file"));
  ASSERT_TRUE(same.has_value());
  EXPECT_EQ(same->message, describe_ranks(same->ranks) + ": bad file");
  EXPECT_EQ(static_cast<int>(same->ranks.size()), world_size());
}

// The exact text users read when every rank, or several, fail alike: each
// distinct error once, after the ranks that gave it, runs of three or more
// ranks as a range; errors in order of the first rank that gave each.
TEST(FailTogether, IdenticalErrorsAreListedOnceWithTheirRanks) {
  auto bootstrap = make_mpi_bootstrap(MPI_COMM_WORLD, kGenerousTimeout);
  const int n = world_size();
  const std::string all = n == 2 ? "ranks 0, 1" : "ranks 0-" + std::to_string(n - 1);

  const auto everyone = run_together(*bootstrap, [] {
    throw peerplan::InvalidArgument("declarations[2] (\"qkv\"): eps is negative");
  });
  ASSERT_TRUE(everyone.has_value());
  EXPECT_EQ(everyone->message, all + ": declarations[2] (\"qkv\"): eps is negative");

  // Rank 1 alone says "a", every other rank "b".
  const auto mixed =
      gather_failures(*bootstrap, std::optional<std::string>(world_rank() == 1 ? "a" : "b"));
  ASSERT_TRUE(mixed.has_value());
  const std::map<int, std::string> expected{{2, "rank 0: b; rank 1: a"},
                                            {3, "ranks 0, 2: b; rank 1: a"},
                                            {4, "ranks 0, 2, 3: b; rank 1: a"},
                                            {5, "ranks 0, 2-4: b; rank 1: a"}};
  if (expected.count(n) != 0) {
    EXPECT_EQ(mixed->message, expected.at(n));
  }
  EXPECT_EQ(static_cast<int>(mixed->ranks.size()), n);

  // Only some ranks fail, alike: the others are not named.
  const auto odd = gather_failures(
      *bootstrap, world_rank() % 2 == 1 ? std::optional<std::string>("x") : std::nullopt);
  ASSERT_TRUE(odd.has_value());
  EXPECT_EQ(odd->message, n >= 4 ? "ranks 1, 3: x" : "rank 1: x");
}

TEST(FailTogether, DescribeRanksShowsRunsOfThreeOrMoreAsRanges) {
  EXPECT_EQ(describe_ranks({3}), "rank 3");
  EXPECT_EQ(describe_ranks({0, 1}), "ranks 0, 1");
  EXPECT_EQ(describe_ranks({0, 2}), "ranks 0, 2");
  EXPECT_EQ(describe_ranks({0, 1, 2}), "ranks 0-2");
  EXPECT_EQ(describe_ranks({0, 1, 2, 3, 4, 5, 6, 7}), "ranks 0-7");
  EXPECT_EQ(describe_ranks({0, 1, 3, 4, 5, 7}), "ranks 0, 1, 3-5, 7");
  EXPECT_EQ(describe_ranks({1, 2, 3, 8, 9, 10, 11}), "ranks 1-3, 8-11");
}

TEST(FailTogether, RunTogetherTurnsALocalErrorIntoEveryRanksFailure) {
  auto bootstrap = make_mpi_bootstrap(MPI_COMM_WORLD, kGenerousTimeout);
  const int last = world_size() - 1;
  const auto failures = run_together(*bootstrap, [&] {
    if (world_rank() == last) throw SystemError("no shared memory here");
  });
  ASSERT_TRUE(failures.has_value());
  EXPECT_EQ(failures->ranks, std::vector<int>{last});
  EXPECT_NE(failures->message.find("no shared memory here"), std::string::npos);
  EXPECT_FALSE(run_together(*bootstrap, [] {}).has_value());
}

TEST(FailTogether, ATimeoutInsideTheStepIsRethrownWithoutAnotherExchange) {
  // A peer that stopped answering would not answer the verdict exchange
  // either: waiting for it again would double the detection time.
  auto bootstrap = make_mpi_bootstrap(MPI_COMM_WORLD, kGenerousTimeout);
  const auto start = std::chrono::steady_clock::now();
  if (world_rank() == 0) {
    EXPECT_THROW(run_together(*bootstrap, [] { throw Timeout("peer 1 is gone"); }), Timeout);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "the step's Timeout was held back";
  }
  // The other ranks make no call either: had rank 0 exchanged, it would
  // have waited for them until kGenerousTimeout.
  bootstrap->barrier();
}

TEST(MpiBootstrap, UserTrafficOnTheSameCommunicatorDoesNotInterfere) {
  // The application uses the communicator it gave us, with the small tags
  // the bootstrap's own calls use, and a wildcard receive that would steal
  // any bootstrap message sent on the user's communicator.
  auto bootstrap = make_mpi_bootstrap(MPI_COMM_WORLD, kGenerousTimeout);
  const int peers = world_size() - 1;
  std::vector<std::array<int, 2>> wildcard(peers);  // {sender, tag} from anyone
  std::vector<MPI_Request> requests;
  for (int i = 0; i < peers; ++i) {
    requests.emplace_back();
    MPI_Irecv(wildcard[i].data(), 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
              &requests.back());
  }
  // Messages sent before the bootstrap runs, tagged like its next calls.
  std::vector<std::array<int, 2>> early(world_size());
  for (int peer = 0; peer < world_size(); ++peer) {
    if (peer == world_rank()) continue;
    early[peer] = {world_rank(), 2 + peer};
    requests.emplace_back();
    MPI_Isend(early[peer].data(), 2, MPI_INT, peer, 2 + peer, MPI_COMM_WORLD, &requests.back());
  }

  const std::vector<Blob> all = bootstrap->allgather(pattern_blob(world_rank()));
  for (int r = 0; r < world_size(); ++r) {
    EXPECT_EQ(all[r], pattern_blob(r)) << "rank " << r;
  }
  bootstrap->barrier();
  EXPECT_EQ(blob_text(bootstrap->broadcast(text_blob("bootstrap"), 0)), "bootstrap");
  EXPECT_TRUE(bootstrap->agree(true));

  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  std::vector<int> senders;
  for (const auto& message : wildcard) {
    EXPECT_EQ(message[1], 2 + world_rank()) << "a message that is not the application's";
    senders.push_back(message[0]);
  }
  std::sort(senders.begin(), senders.end());
  std::vector<int> others;
  for (int r = 0; r < world_size(); ++r) {
    if (r != world_rank()) others.push_back(r);
  }
  EXPECT_EQ(senders, others);
}

// Runs `call` on every rank except `absent`, which instead waits for the
// others on a communicator of its own; the others must throw Timeout within
// the bound, naming the absent ranks. Returns the message seen by this rank
// (empty on absent ranks).
std::string expect_timeout_without(const std::vector<int>& absent,
                                   const std::function<void(Bootstrap&)>& call) {
  Dup resync(MPI_COMM_WORLD);
  std::string message;
  {
    auto bootstrap = make_mpi_bootstrap(MPI_COMM_WORLD, kTestTimeout);
    bootstrap->barrier();  // all present: the clock measures the timeout only
    const bool away = std::find(absent.begin(), absent.end(), world_rank()) != absent.end();
    if (!away) {
      const auto start = std::chrono::steady_clock::now();
      try {
        call(*bootstrap);
        ADD_FAILURE() << "returned although ranks were absent";
      } catch (const peerplan::Timeout& e) {
        message = e.what();
        EXPECT_EQ(e.code(), peerplan::ErrorCode::timeout);
      }
      const auto waited = std::chrono::steady_clock::now() - start;
      EXPECT_GE(waited, kTestTimeout);
      EXPECT_LT(waited, kTestTimeout + 10s) << "the bound was not kept";
    }
    // The absent ranks re-join only once everyone else has given up.
    MPI_Barrier(resync.get());
  }
  return message;
}

std::string ranks_phrase(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return text;
}

TEST(MpiBootstrap, BarrierTimesOutNamingTheMissingRank) {
  const std::vector<int> absent{world_size() - 1};
  const std::string message = expect_timeout_without(absent, [](Bootstrap& b) { b.barrier(); });
  if (world_rank() != absent[0]) {
    EXPECT_NE(message.find("bootstrap barrier"), std::string::npos) << message;
    EXPECT_NE(message.find("waiting for " + ranks_phrase(absent) + " ("), std::string::npos)
        << message;
    EXPECT_NE(message.find("500 ms"), std::string::npos) << message;
    EXPECT_NE(message.find("PEERPLAN_TIMEOUT_MS"), std::string::npos) << message;
  }
}

TEST(MpiBootstrap, AllgatherTimesOutNamingEveryMissingRank) {
  std::vector<int> absent;  // the odd ranks: 1, or 1 and 3
  for (int r = 1; r < world_size(); r += 2) absent.push_back(r);
  const std::string message =
      expect_timeout_without(absent, [](Bootstrap& b) { b.allgather(pattern_blob(world_rank())); });
  if (world_rank() % 2 == 0) {
    EXPECT_NE(message.find("bootstrap allgather"), std::string::npos) << message;
    EXPECT_NE(message.find("waiting for " + ranks_phrase(absent) + " ("), std::string::npos)
        << message;
  }
}

TEST(MpiBootstrap, BroadcastTimesOutWhenTheRootIsMissing) {
  const std::string message =
      expect_timeout_without({0}, [](Bootstrap& b) { b.broadcast(text_blob("never"), 0); });
  if (world_rank() != 0) {
    EXPECT_NE(message.find("waiting for rank 0 ("), std::string::npos) << message;
  }
}

TEST(MpiBootstrap, AgreementTimesOutInsteadOfDecidingWithoutARank) {
  const std::vector<int> absent{world_size() - 1};
  const std::string message = expect_timeout_without(absent, [](Bootstrap& b) { b.agree(true); });
  if (world_rank() != absent[0]) {
    EXPECT_NE(message.find("waiting for " + ranks_phrase(absent) + " ("), std::string::npos)
        << message;
  }
}

TEST(MpiBootstrap, ANewBootstrapWorksAfterATimeout) {
  expect_timeout_without({world_size() - 1}, [](Bootstrap& b) { b.barrier(); });
  // Abandoned messages of the timed-out call must not leak into new work.
  auto bootstrap = make_mpi_bootstrap(MPI_COMM_WORLD, kGenerousTimeout);
  const std::vector<Blob> all = bootstrap->allgather(pattern_blob(world_rank()));
  for (int r = 0; r < world_size(); ++r) {
    EXPECT_EQ(all[r], pattern_blob(r)) << "rank " << r;
  }
  EXPECT_TRUE(bootstrap->agree(true));
}

// ------------------------------------------------ late ranks in the construction
//
// The construction's first step, the duplication of the user's communicator
// (MPI_Comm_idup), is a collective on the user's communicator. A rank that
// reaches it after the others gave up matches their abandoned duplications;
// its duplicate then exists, but the ranks that gave up are not on it. What
// follows the duplication must therefore be bounded on every rank: a late
// rank gets a Timeout naming the ranks that did not answer, never a hang.
// Afterwards every rank has made the same number of duplications, so the
// collectives on the user's communicator line up again and a new bootstrap
// works.

// Generous against a loaded CI machine (4 ranks on 2 cores); a hang is far
// beyond it.
constexpr auto kSlack = 5s;

using peerplan::mpi_test::meet_or_abort;

// What make_mpi_bootstrap did on this rank: how it ended (Attempt) and the
// bootstrap when it returned one.
struct Construction : peerplan::comm_test::Attempt {
  std::unique_ptr<Bootstrap> bootstrap;
};

Construction construct(MPI_Comm comm, std::chrono::milliseconds timeout) {
  Construction c;
  static_cast<peerplan::comm_test::Attempt&>(c) =
      peerplan::comm_test::attempt([&] { c.bootstrap = make_mpi_bootstrap(comm, timeout); });
  return c;
}

// A new bootstrap on every rank works: the user's communicator's sequence of
// collectives lines up again.
void expect_a_new_bootstrap_works() {
  meet_or_abort("before the new bootstrap");
  auto bootstrap = make_mpi_bootstrap(MPI_COMM_WORLD, kGenerousTimeout);
  EXPECT_EQ(bootstrap->size(), world_size());
  const std::vector<Blob> all = bootstrap->allgather(pattern_blob(world_rank()));
  ASSERT_EQ(static_cast<int>(all.size()), world_size());
  for (int r = 0; r < world_size(); ++r) {
    EXPECT_EQ(all[r], pattern_blob(r)) << "rank " << r;
  }
  const int me = world_rank();
  EXPECT_EQ(
      static_cast<int>(
          bootstrap->local_allgather({reinterpret_cast<const std::byte*>(&me), sizeof me}).size()),
      bootstrap->local_size());
  EXPECT_TRUE(bootstrap->agree(true));
}

std::vector<int> ranks_except(int excluded) {
  std::vector<int> ranks;
  for (int r = 0; r < world_size(); ++r) {
    if (r != excluded) ranks.push_back(r);
  }
  return ranks;
}

TEST(MpiBootstrapLate, ARankArrivingAfterTheOthersGaveUpTimesOutNamingThem) {
  const int late = world_size() - 1;
  meet_or_abort("before the construction");
  if (world_rank() == late) std::this_thread::sleep_for(kTestTimeout + 1000ms);
  const Construction c = construct(MPI_COMM_WORLD, kTestTimeout);
  meet_or_abort("after the construction with a late rank");
  EXPECT_TRUE(c.timed_out) << "expected peerplan::Timeout; " << c.message;
  EXPECT_LT(c.elapsed, kTestTimeout + kSlack) << c.message;
  if (world_rank() != late) {
    EXPECT_GE(c.elapsed, kTestTimeout);
    // Nothing can say which rank did not join the duplication: the message
    // says so, and how to find out.
    EXPECT_NE(c.message.find("cannot tell which rank"), std::string::npos) << c.message;
    EXPECT_NE(c.message.find("PEERPLAN_DEBUG=INFO"), std::string::npos) << c.message;
    EXPECT_NE(c.message.find("PEERPLAN_TIMEOUT_MS"), std::string::npos) << c.message;
  } else {
    // Its duplication matched the abandoned ones; the exchange after it
    // names the ranks that had given up.
    EXPECT_NE(c.message.find("waiting for " + ranks_phrase(ranks_except(late)) + " ("),
              std::string::npos)
        << c.message;
  }
  expect_a_new_bootstrap_works();
}

TEST(MpiBootstrapLate, RanksWhoseDuplicationCompletedWithoutOneNameIt) {
  // The race of a stalled rank that resumes while the others' deadlines
  // expire: rank 0 gives up on the duplication; the last rank arrives after
  // that but within the other ranks' (longer) timeout, so their duplication
  // completes (it matched rank 0's abandoned one) while rank 0 is not on the
  // duplicate. They must time out naming rank 0, not hang.
  constexpr auto kShort = 500ms;
  constexpr auto kLong = 3000ms;
  const int late = world_size() - 1;
  meet_or_abort("before the construction");
  if (world_rank() == late) std::this_thread::sleep_for(kShort + 1000ms);
  const Construction c = construct(MPI_COMM_WORLD, world_rank() == 0 ? kShort : kLong);
  meet_or_abort("after the construction with mixed timeouts");
  EXPECT_TRUE(c.timed_out) << "expected peerplan::Timeout; " << c.message;
  if (world_rank() == 0) {
    EXPECT_GE(c.elapsed, kShort);
    EXPECT_LT(c.elapsed, kShort + kSlack) << c.message;
  } else {
    EXPECT_LT(c.elapsed, kLong + kSlack) << c.message;
    EXPECT_NE(c.message.find("waiting for rank 0 ("), std::string::npos) << c.message;
  }
  expect_a_new_bootstrap_works();
}

TEST(MpiBootstrapLate, ARankLateAfterTheDuplicationIsNamed) {
  // Every rank duplicated the communicator; the last one then stalls. The
  // rest of the construction is bounded and names it. The late rank itself
  // may find every message waiting for it (the others sent theirs before
  // giving up) and get a bootstrap: then its first collective names them.
  const int late = world_size() - 1;
  constexpr auto kStall = kTestTimeout + 1500ms;
  const std::string rule =
      "bootstrap.duplicated@" + std::to_string(late) + ":sleep=" + std::to_string(kStall.count());
  ::setenv("PEERPLAN_FAULT_INJECT", rule.c_str(), 1);
  peerplan::fault::reload_for_tests();
  meet_or_abort("before the construction");
  Construction c = construct(MPI_COMM_WORLD, kTestTimeout);
  ::unsetenv("PEERPLAN_FAULT_INJECT");
  peerplan::fault::reload_for_tests();
  if (world_rank() == late && c.bootstrap) {
    const auto start = std::chrono::steady_clock::now();
    try {
      c.bootstrap->barrier();
      c.message = "its first barrier returned although the others had given up";
    } catch (const Timeout& e) {
      c.timed_out = true;
      c.message = e.what();
    }
    c.elapsed = std::chrono::steady_clock::now() - start;
  }
  c.bootstrap.reset();
  meet_or_abort("after the construction with a rank late after the duplication");
  EXPECT_TRUE(c.timed_out) << "expected peerplan::Timeout; " << c.message;
  if (world_rank() != late) {
    EXPECT_GE(c.elapsed, kTestTimeout);
    EXPECT_LT(c.elapsed, kTestTimeout + kSlack) << c.message;
    EXPECT_NE(c.message.find("waiting for " + ranks_phrase({late}) + " ("), std::string::npos)
        << c.message;
  } else {
    EXPECT_LT(c.elapsed, kStall + kTestTimeout + kSlack) << c.message;
    EXPECT_NE(c.message.find("waiting for " + ranks_phrase(ranks_except(late)) + " ("),
              std::string::npos)
        << c.message;
  }
  expect_a_new_bootstrap_works();
}

TEST(MpiBootstrap, LateMessagesOfABrokenBootstrapNeverReachALaterOne) {
  // Rank 0 gives up on a call; the others make it (and one more) after rank
  // 0 dropped its bootstrap, so their messages to rank 0 arrive for a
  // communicator rank 0 no longer uses. A later bootstrap (whose duplicate
  // MPI may give the same context id, were the old one freed) must never
  // take them for its own.
  meet_or_abort("before the first bootstrap");
  auto first = make_mpi_bootstrap(MPI_COMM_WORLD, kTestTimeout);
  first->barrier();  // all present
  if (world_rank() == 0) {
    EXPECT_THROW(first->allgather(text_blob("early")), Timeout);
    first.reset();
  }
  meet_or_abort("rank 0 gave up and dropped its bootstrap");
  if (world_rank() != 0) {
    // Completes (rank 0's message was sent before it gave up); then a
    // barrier rank 0 never makes times out.
    EXPECT_NO_THROW(first->allgather(text_blob("late " + std::to_string(world_rank()))));
    EXPECT_THROW(first->barrier(), Timeout);
    first.reset();
  }
  meet_or_abort("every rank dropped its first bootstrap");
  auto second = make_mpi_bootstrap(MPI_COMM_WORLD, kGenerousTimeout);
  for (int round = 0; round < 4; ++round) {
    const std::vector<Blob> all = second->allgather(pattern_blob(world_rank() + round));
    ASSERT_EQ(static_cast<int>(all.size()), world_size());
    for (int r = 0; r < world_size(); ++r) {
      EXPECT_EQ(all[r], pattern_blob(r + round)) << "round " << round << ", blob of rank " << r;
    }
  }
  second->barrier();
}

TEST(MpiBootstrap, DestroyingABootstrapDoesNotWaitForThePeers) {
  // MPI_Comm_free of the duplicate is local: rank 0 destroys its bootstrap
  // while the others keep theirs alive until rank 0 has returned.
  auto bootstrap = make_mpi_bootstrap(MPI_COMM_WORLD, kGenerousTimeout);
  bootstrap->barrier();
  if (world_rank() == 0) {
    const auto start = std::chrono::steady_clock::now();
    bootstrap.reset();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s) << "destroying waited for the peers";
  }
  // Bounded: had the destruction waited for the others, the job aborts here.
  meet_or_abort("after rank 0 destroyed its bootstrap", MPI_COMM_NULL, 20s);
  bootstrap.reset();
}

TEST(MpiBootstrap, RejectsBadArguments) {
  EXPECT_THROW(make_mpi_bootstrap(MPI_COMM_NULL, kGenerousTimeout), peerplan::InvalidArgument);
  EXPECT_THROW(make_mpi_bootstrap(MPI_COMM_WORLD, 0ms), peerplan::InvalidArgument);
  // Past INT_MAX ms, now + timeout overflows: a timeout at once, then a crash in MPI_Finalize.
  EXPECT_THROW(make_mpi_bootstrap(MPI_COMM_WORLD, std::chrono::milliseconds::max()),
               peerplan::InvalidArgument);
  EXPECT_THROW(make_mpi_bootstrap(MPI_COMM_WORLD, peerplan::kMaxTimeout + 1ms),
               peerplan::InvalidArgument);
}

// Node placement from node keys (no MPI involved): what
// MPI_Comm_split_type(SHARED) used to give, from an allgather of keys.
TEST(NodePlacement, NodesAreNumberedByLowestRankAndLocalRanksFollowRanks) {
  using peerplan::bootstrap::detail::place_on_nodes;
  // Ranks interleaved over three nodes: b holds ranks 0, 3, 4; a holds 1, 5; c holds 2.
  const std::vector<std::string> keys{"b", "a", "c", "b", "b", "a"};
  const struct {
    int node_id;
    int local_rank;
    std::vector<int> members;
  } expected[] = {{0, 0, {0, 3, 4}}, {1, 0, {1, 5}},    {2, 0, {2}},
                  {0, 1, {0, 3, 4}}, {0, 2, {0, 3, 4}}, {1, 1, {1, 5}}};
  for (int rank = 0; rank < static_cast<int>(keys.size()); ++rank) {
    const auto placement = place_on_nodes(keys, rank);
    EXPECT_EQ(placement.num_nodes, 3) << "rank " << rank;
    EXPECT_EQ(placement.node_id, expected[rank].node_id) << "rank " << rank;
    EXPECT_EQ(placement.local_rank, expected[rank].local_rank) << "rank " << rank;
    EXPECT_EQ(placement.members, expected[rank].members) << "rank " << rank;
  }
  const auto alone = place_on_nodes(std::vector<std::string>{"x"}, 0);
  EXPECT_EQ(alone.num_nodes, 1);
  EXPECT_EQ(alone.members, std::vector<int>{0});
  EXPECT_THROW(place_on_nodes(keys, 6), peerplan::InternalError);
}

TEST(NodePlacement, TheNodeKeyNamesTheHostAndIsStable) {
  const std::string key = peerplan::bootstrap::detail::node_key();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  EXPECT_EQ(key.rfind(std::string(host) + "/", 0), 0u) << key;
  EXPECT_GT(key.size(), std::string(host).size() + 1) << "no boot id: " << key;
  EXPECT_EQ(key, peerplan::bootstrap::detail::node_key());
}

// The launch check, with environments as launchers set them.
using Environment = std::map<std::string, std::string>;

peerplan::bootstrap::EnvironmentLookup lookup_in(const Environment& environment) {
  return [environment](const std::string& name) -> std::optional<std::string> {
    const auto it = environment.find(name);
    if (it == environment.end()) return std::nullopt;
    return it->second;
  };
}

std::string launch_error(int mpi_world_size, const Environment& environment) {
  try {
    peerplan::bootstrap::check_launch(mpi_world_size, lookup_in(environment));
  } catch (const peerplan::InvalidUsage& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchCheck, AcceptsConsistentLaunches) {
  EXPECT_EQ(launch_error(1, {}), "");
  EXPECT_EQ(launch_error(4, {{"OMPI_COMM_WORLD_SIZE", "4"}}), "");
  EXPECT_EQ(launch_error(1, {{"OMPI_COMM_WORLD_SIZE", "1"}}), "");
  EXPECT_EQ(launch_error(2, {{"PMI_SIZE", "2"}, {"SLURM_STEP_NUM_TASKS", "2"}}), "");
  // A batch script exports its allocation's task count to a lone process.
  EXPECT_EQ(launch_error(1, {{"SLURM_NTASKS", "8"}, {"SLURM_NPROCS", "8"}}), "");
  EXPECT_EQ(launch_error(1, {{"WORLD_SIZE", "2"}}), "");   // no RANK: not torchrun
  EXPECT_EQ(launch_error(1, {{"PMI_SIZE", "many"}}), "");  // unreadable proves nothing
  // The real environment of this mpirun-launched test.
  EXPECT_NO_THROW(peerplan::bootstrap::check_launch(world_size()));
}

TEST(LaunchCheck, ReportsOneRankJobsStartedBySeveralProcessLaunchers) {
  struct Case {
    Environment environment;
    std::string variable;
    std::string advice;
  };
  const std::vector<Case> cases = {
      {{{"OMPI_COMM_WORLD_SIZE", "4"}}, "OMPI_COMM_WORLD_SIZE=4", "mpirun"},
      {{{"PMI_SIZE", "2"}}, "PMI_SIZE=2", "mpirun"},
      {{{"MV2_COMM_WORLD_SIZE", "3"}}, "MV2_COMM_WORLD_SIZE=3", "mpirun"},
      {{{"SLURM_STEP_NUM_TASKS", "8"}}, "SLURM_STEP_NUM_TASKS=8", "srun --mpi=pmix"},
      {{{"SLURM_NTASKS", "8"}, {"SLURM_PROCID", "5"}}, "SLURM_NTASKS=8", "srun --mpi=pmix"},
      {{{"SLURM_NPROCS", "6"}, {"SLURM_PROCID", "1"}}, "SLURM_NPROCS=6", "srun --mpi=pmix"},
      {{{"WORLD_SIZE", "2"}, {"RANK", "1"}}, "WORLD_SIZE=2", "torchrun"},
  };
  for (const Case& c : cases) {
    const std::string message = launch_error(1, c.environment);
    EXPECT_NE(message.find(c.variable), std::string::npos) << c.variable << ": " << message;
    EXPECT_NE(message.find("separate one-rank MPI jobs"), std::string::npos) << message;
    EXPECT_NE(message.find(c.advice), std::string::npos) << message;
    // With a real multi-rank MPI world the same variables are fine.
    EXPECT_EQ(launch_error(2, c.environment), "") << c.variable;
  }
}

}  // namespace
