// SPDX-License-Identifier: Apache-2.0
// A verdict's allgather (TimedExchange::allgather_by) under mpirun with 2, 3
// and 4 ranks: each message carries the in-time word only if it leaves
// before the sender's deadline, and the sender knows who got which word,
// also when it stalls between two of its messages.
#include <mpi.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bootstrap/timed_exchange.hpp"
#include "support/fault_test_support.hpp"
#include "support/mpi_test_support.hpp"

namespace {

using peerplan::bootstrap::Blob;
using peerplan::bootstrap::detail::TimedExchange;
using peerplan::comm_test::ScopedFaultInjection;
using peerplan::mpi_test::meet_or_abort;
using peerplan::mpi_test::world_rank;
using peerplan::mpi_test::world_size;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::byte kLate{200};
std::byte in_time_word(int rank) { return static_cast<std::byte>(10 + rank); }

// A duplicate of the world for one test, so that the words a sender left
// unread cannot meet another test's exchange.
class Exchange {
 public:
  Exchange() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    exchange_.emplace(comm_, 30s);
  }
  ~Exchange() { MPI_Comm_free(&comm_); }
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  std::vector<Blob> say(Clock::time_point deadline, TimedExchange::Said& said) {
    const std::byte mine = in_time_word(world_rank());
    return exchange_->allgather_by(std::span(&mine, 1), std::span(&kLate, 1), deadline, said,
                                   "test verdict", 30s);
  }
  // A rank that returned without waiting takes the words it left unread
  // (every other rank sends one), so that freeing the communicator leaves
  // nothing in flight.
  void take_unread_words() {
    for (int i = 0; i + 1 < world_size(); ++i) {
      std::byte word{};
      MPI_Recv(&word, 1, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, MPI_STATUS_IGNORE);
    }
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::optional<TimedExchange> exchange_;
};

std::vector<int> every_rank_but(int excluded, int from = 0) {
  std::vector<int> ranks;
  for (int r = from; r < world_size(); ++r) {
    if (r != excluded) ranks.push_back(r);
  }
  return ranks;
}

// What a rank whose word did not reach every rank in time must report: who
// got which word, and no words of the others (it does not wait for them).
void expect_not_all_in_time(const TimedExchange::Said& said, const std::vector<Blob>& words,
                            const std::vector<int>& in_time, const std::vector<int>& late) {
  EXPECT_FALSE(said.all_in_time());
  EXPECT_EQ(said.in_time, in_time);
  EXPECT_EQ(said.late, late);
  EXPECT_EQ(said.unsure, -1);
  EXPECT_TRUE(words.empty());
}

TEST(VerdictExchange, EveryWordInTimeGathersEveryRanksWord) {
  Exchange exchange;
  TimedExchange::Said said;
  const std::vector<Blob> words = exchange.say(Clock::now() + 30s, said);
  EXPECT_TRUE(said.all_in_time());
  EXPECT_EQ(said.in_time, every_rank_but(world_rank()));
  EXPECT_TRUE(said.late.empty());
  EXPECT_EQ(said.unsure, -1);
  ASSERT_EQ(words.size(), static_cast<std::size_t>(world_size()));
  for (int r = 0; r < world_size(); ++r) EXPECT_EQ(words[r], Blob{in_time_word(r)}) << "rank " << r;
}

TEST(VerdictExchange, ARankPastItsDeadlineSaysLateToEveryRankAndDoesNotWait) {
  Exchange exchange;
  const int late = world_size() - 1;
  const bool mine_late = world_rank() == late;
  TimedExchange::Said said;
  const auto start = Clock::now();
  const std::vector<Blob> words = exchange.say(mine_late ? start - 1ms : start + 30s, said);
  if (mine_late) {
    EXPECT_LT(Clock::now() - start, 5s) << "it waited for the others' words";
    expect_not_all_in_time(said, words, {}, every_rank_but(late));
    exchange.take_unread_words();
  } else {
    EXPECT_TRUE(said.all_in_time());
    ASSERT_EQ(words.size(), static_cast<std::size_t>(world_size()));
    EXPECT_EQ(words[late], Blob{kLate});
    EXPECT_EQ(words[world_rank()], Blob{in_time_word(world_rank())});
  }
  meet_or_abort("after a verdict with a late rank");
}

TEST(VerdictExchange, AStallBetweenTwoMessagesPastTheDeadlineIsSeenAndNamesWhoGotWhat) {
  PEERPLAN_MPI_SKIP_IF(world_size() < 3, "needs a rank before and after the stall");
  // Rank 0 sends to rank 1, then stalls past its deadline before it sends
  // to ranks 2, ...: rank 1 gets its in-time word, the others the late one.
  const ScopedFaultInjection stall("verdict.first_sent@0:sleep=1500");
  Exchange exchange;
  meet_or_abort("before the verdict with a stall");
  TimedExchange::Said said;
  const auto start = Clock::now();
  const std::vector<Blob> words = exchange.say(start + (world_rank() == 0 ? 1000ms : 30s), said);
  if (world_rank() == 0) {
    expect_not_all_in_time(said, words, {1}, every_rank_but(0, 2));
    exchange.take_unread_words();
  } else {
    EXPECT_TRUE(said.all_in_time());
    ASSERT_EQ(words.size(), static_cast<std::size_t>(world_size()));
    EXPECT_EQ(words[0], world_rank() == 1 ? Blob{in_time_word(0)} : Blob{kLate});
  }
  meet_or_abort("after the verdict with a stall");
}

}  // namespace
