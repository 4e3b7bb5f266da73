// SPDX-License-Identifier: Apache-2.0
// Communicator::create when a rank is late or stopped (docs/design.md, Bounded
// waits): every rank raises peerplan::Timeout within the bound, never hangs;
// the timeouts name the missing ranks wherever MPI allows (every step after the
// duplication of the user's communicator; the duplication itself cannot know
// who is missing and says so); and a new create on every rank works again
// (here after a barrier; without one: fault.recovery.retry-after-stop).
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "core/fault_injection.hpp"
#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "support/communicator_test_support.hpp"
#include "support/fault_test_support.hpp"
#include "support/mpi_test_support.hpp"

namespace peerplan::comm_test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kTimeout = 1000ms;
// Generous: CI oversubscribes 4 ranks onto 2 cores; a hang is far beyond it.
constexpr auto kSlack = 5000ms;

Config timeout_config() {
  Config config;
  config.timeout = kTimeout;
  return config;
}

Attempt attempt_create(Config config = timeout_config()) {
  return attempt([&] { create_on_world(config); });
}

std::vector<int> ranks_except(int excluded) {
  std::vector<int> ranks;
  for (int r = 0; r < test_size(); ++r) {
    if (r != excluded) ranks.push_back(r);
  }
  return ranks;
}

void expect_names_ranks(const Attempt& a, const std::vector<int>& ranks) {
  for (int r : ranks) {
    EXPECT_TRUE(names_rank(a.message, r))
        << "the message must name rank " << r << ": " << a.message;
  }
}

// The Timeout of the duplication: it cannot name the missing rank, says so
// and what to do.
void expect_duplication_timeout(const Attempt& a) {
  EXPECT_TRUE(a.timed_out) << "expected peerplan::Timeout; " << a.message;
  EXPECT_GE(a.elapsed, kTimeout);
  EXPECT_LT(a.elapsed, kTimeout + kSlack) << a.message;
  EXPECT_NE(a.message.find("cannot tell which rank"), std::string::npos) << a.message;
  EXPECT_NE(a.message.find("PEERPLAN_DEBUG=INFO"), std::string::npos) << a.message;
  EXPECT_NE(a.message.find("PEERPLAN_TIMEOUT_MS"), std::string::npos) << a.message;
}

const std::vector<Declaration>& declared_set() {
  static const std::vector<Declaration> set{
      Declaration::all_reduce("small", DataType::f32, TensorLayout{2, 64})};
  return set;
}

// Every rank creates a communicator again (after a barrier on the test's
// own communicator) and it works: fallback and P2P calls give correct sums.
void expect_create_works_again(const std::string& when) {
  meet_or_abort(("before creating again " + when).c_str());
  std::unique_ptr<Communicator> comm;
  ASSERT_NO_THROW(comm = create_on_world(timeout_config())) << when;
  expect_all_reduce_correct(run_all_reduce(*comm, DataType::f32, TensorLayout{3, 32},
                                           Inputs::integers, false, next_seed()),
                            "an undeclared call " + when);
  comm->declare(declared_set());
  expect_all_reduce_correct(run_all_reduce(*comm, DataType::f32, TensorLayout{2, 64},
                                           Inputs::integers, false, next_seed()),
                            "a declared call " + when);
  comm->close();
}

TEST(CreateTimeout, ARankReachingCreateAfterTheOthersGaveUpTimesOutNamingThem) {
  const int late = test_size() - 1;
  meet_or_abort("before create");
  if (test_rank() == late) std::this_thread::sleep_for(kTimeout + 1000ms);
  const Attempt a = attempt_create();
  meet_or_abort("after create with a late rank");
  if (test_rank() != late) {
    expect_duplication_timeout(a);
  } else {
    // Its duplication matched the ones the others abandoned; the next step
    // names them.
    EXPECT_TRUE(a.timed_out) << "expected peerplan::Timeout; " << a.message;
    EXPECT_LT(a.elapsed, kTimeout + kSlack) << a.message;
    expect_names_ranks(a, ranks_except(late));
  }
  expect_create_works_again("after a late create");
}

// A rank stalls at a fault point after the duplication (inside the
// bootstrap, or right after it): the others' Timeout names it; the stalled
// rank, when it resumes, times out in a later step naming them.
class LateAfterTheDuplication : public ::testing::TestWithParam<const char*> {};

TEST_P(LateAfterTheDuplication, TheTimeoutsOfCreateNameTheMissingRanks) {
  const int late = test_size() - 1;
  constexpr auto kStall = kTimeout + 1500ms;
  const std::string rule = std::string(GetParam()) + "@" + std::to_string(late) +
                           ":sleep=" + std::to_string(kStall.count());
  Attempt a;
  {
    const ScopedFaultInjection inject(rule);
    meet_or_abort("before create");
    a = attempt_create();
  }
  meet_or_abort("after create with a rank late after the duplication");
  EXPECT_TRUE(a.timed_out) << "expected peerplan::Timeout; " << a.message;
  if (test_rank() != late) {
    EXPECT_GE(a.elapsed, kTimeout);
    EXPECT_LT(a.elapsed, kTimeout + kSlack) << a.message;
    expect_names_ranks(a, {late});
    EXPECT_NE(a.message.find("PEERPLAN_TIMEOUT_MS"), std::string::npos) << a.message;
  } else {
    EXPECT_LT(a.elapsed, kStall + kTimeout + kSlack) << a.message;
    expect_names_ranks(a, ranks_except(late));
  }
  expect_create_works_again(std::string("after a rank stalled at ") + GetParam());
}

INSTANTIATE_TEST_SUITE_P(Points, LateAfterTheDuplication,
                         ::testing::Values("bootstrap.duplicated", "create.after_bootstrap"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '.') c = '_';
                           }
                           return name;
                         });

// A rank is stopped (SIGSTOP) while the others use, close and re-create the
// communicator; a peer continues it (SIGCONT) once they have timed out.
// Neither the others' close + re-create nor the resumed rank's may hang;
// then every rank creates a working communicator again.
TEST(CreateTimeout, AStoppedRankHangsNeitherTheOthersRecreateNorItself) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "SIGCONT needs every rank on one node");
  const int stopped = test_size() - 1;
  const std::vector<pid_t> pids = allgather_value(::getpid());
  // The ranks that keep running meet among themselves while it is stopped.
  MPI_Comm running = MPI_COMM_NULL;
  MPI_Comm_split(test_comm(), test_rank() == stopped ? MPI_UNDEFINED : 0, test_rank(), &running);

  auto comm = create_on_world(timeout_config());
  comm->declare(declared_set());
  expect_all_reduce_correct(run_all_reduce(*comm, DataType::f32, TensorLayout{2, 64},
                                           Inputs::integers, false, next_seed()),
                            "before the stop");
  meet_or_abort("before the stop");

  if (test_rank() == stopped) {
    ::raise(SIGSTOP);  // until a peer sends SIGCONT
    // Resumed: the peers gave up on the declare and on a new create long ago.
    const Attempt declared = attempt([&] { comm->declare(declared_set()); });
    EXPECT_LT(declared.elapsed, kTimeout + kSlack) << declared.message;
    comm->close();
    const Attempt recreated = attempt_create();
    EXPECT_TRUE(recreated.timed_out) << "expected peerplan::Timeout; " << recreated.message;
    EXPECT_LT(recreated.elapsed, kTimeout + kSlack) << recreated.message;
    expect_names_ranks(recreated, ranks_except(stopped));
  } else {
    const Attempt declared = attempt([&] { comm->declare(declared_set()); });
    EXPECT_TRUE(declared.timed_out) << "expected peerplan::Timeout; " << declared.message;
    EXPECT_LT(declared.elapsed, kTimeout + kSlack) << declared.message;
    expect_names_ranks(declared, {stopped});
    comm->close();
    expect_duplication_timeout(attempt_create());
    meet_or_abort("the running ranks timed out", running);
    if (test_rank() == 0) ::kill(pids[stopped], SIGCONT);
  }
  comm.reset();
  if (running != MPI_COMM_NULL) MPI_Comm_free(&running);
  expect_create_works_again("after the stopped rank resumed");
}

}  // namespace
}  // namespace peerplan::comm_test
