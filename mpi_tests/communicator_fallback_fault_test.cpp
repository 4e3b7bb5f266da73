// SPDX-License-Identifier: Apache-2.0
// Faults in the fallback (host backend: MPI_Iallreduce polled against the
// timeout). One rank is late or stalls at an exact point of a fallback call;
// then
//   - every rank raises Timeout for that call (no rank returns a result the
//     others did not get); the late rank's message names the ranks that gave
//     up waiting for it, the others' messages name the late rank;
//   - every rank closes the communicator (as docs/faults.md says to), creates a
//     new one, and fallback calls on it give correct sums;
//   - the process reaches MPI_Finalize (the harness's main calls it after the
//     last test) and exits 0, although the abandoned reductions completed
//     only after close(): what they use must still be alive then.
// Each scenario runs for several dtypes (f16/bf16 reduce through
// user-defined MPI operations), so the binary goes through it several times
// before MPI_Finalize.
#include <mpi.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <optional>
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
// How long the late rank is late: beyond the others' timeout plus their
// roll call (timeout / 2), with room to spare.
constexpr auto kLate = 2500ms;
// Generous: CI oversubscribes 4 ranks onto 2 cores, so a waiting rank may
// notice its deadline late; a hang would be far beyond this.
constexpr auto kSlack = 2500ms;

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Where the late rank is late.
enum class Fault {
  before_call,     // it makes the call kLate after the others
  after_posting,   // it posts the reduction, then stalls (fault point fallback.posted)
  after_reducing,  // its reduction completed, then it stalls (fault point fallback.reduced)
};

const char* to_string(Fault f) {
  switch (f) {
    case Fault::before_call:
      return "before_call";
    case Fault::after_posting:
      return "after_posting";
    case Fault::after_reducing:
      break;
  }
  return "after_reducing";
}

struct Case {
  Fault fault;
  DataType dtype;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << to_string(c.fault) << '_' << to_string(c.dtype);
}

Config timeout_config() {
  Config config;
  config.timeout = kTimeout;
  return config;
}

class LateRank : public ::testing::TestWithParam<Case> {};

TEST_P(LateRank, EveryRankTimesOutNamingTheOthersThenANewCommunicatorWorks) {
  const Case c = GetParam();
  const int n = test_size();
  const int me = test_rank();
  const int late = n - 1;
  const TensorLayout layout{3, 64};  // never declared: the fallback

  std::string inject;
  if (c.fault == Fault::after_posting) {
    inject = "fallback.posted@" + std::to_string(late) + ":sleep=" + std::to_string(kLate.count());
  } else if (c.fault == Fault::after_reducing) {
    inject = "fallback.reduced@" + std::to_string(late) + ":sleep=" + std::to_string(kLate.count());
  }

  auto comm = create_on_world(timeout_config());
  expect_all_reduce_correct(
      run_all_reduce(*comm, c.dtype, layout, Inputs::integers, false, next_seed()),
      "a fallback call before the fault");

  Attempt mine;
  {
    const ScopedFaultInjection armed(inject);
    Buffer in = Buffer::for_layout(c.dtype, layout);
    Buffer out = Buffer::for_layout(c.dtype, layout);
    for (std::int64_t i = 0; i < layout.numel(); ++i) in.set(i, 1.0f);
    if (me == late && c.fault == Fault::before_call) std::this_thread::sleep_for(kLate);
    mine = attempt([&] { comm->all_reduce(in.data(), out.data(), c.dtype, layout); });
    if (!mine.timed_out) mine.message += " (result " + std::to_string(out.get(0)) + ")";
  }
  // What docs/faults.md says to do after a fallback timeout: close (on every
  // rank, at once: the ranks that gave up close before the late rank has
  // even made its call) and create a new communicator.
  EXPECT_NO_THROW(comm->close());
  // Everyone meets here, on the tests' own communicator, which keeps MPI
  // progressing the abandoned reductions (of the closed communicator) while
  // the late rank catches up.
  MPI_Barrier(test_comm());

  EXPECT_TRUE(mine.timed_out) << "every rank must raise Timeout for the call; got: "
                              << mine.message;
  EXPECT_NE(mine.message.find("PEERPLAN_TIMEOUT_MS"), std::string::npos)
      << "the message should say what to change: " << mine.message;
  if (me != late) {
    EXPECT_TRUE(names_rank(mine.message, late))
        << "the message must name the late rank " << late << ": " << mine.message;
    // The reduction's wait plus the verdict's (at most a timeout plus a
    // roll call of half of it).
    EXPECT_LT(mine.elapsed_ms(), ms(kTimeout + kTimeout / 2 + kSlack))
        << "the Timeout came too late: " << mine.message;
  } else if (c.fault == Fault::before_call) {
    for (int r = 0; r < n; ++r) {
      if (r == late) continue;
      EXPECT_TRUE(names_rank(mine.message, r))
          << "the late rank's message must name rank " << r << ", which gave up: " << mine.message;
    }
    EXPECT_LT(mine.elapsed_ms(), ms(kTimeout + kSlack)) << "the late call must not hang";
  }
  // Somebody waited the whole timeout before giving up (no premature failure).
  const auto all = allgather_value(me != late ? mine.elapsed_ms() : 0.0);
  double longest = 0;
  for (double t : all) longest = std::max(longest, t);
  EXPECT_GE(longest, 0.9 * ms(kTimeout));

  auto fresh = create_on_world(timeout_config());
  for (int call = 0; call < 2; ++call) {
    expect_all_reduce_correct(
        run_all_reduce(*fresh, c.dtype, layout, Inputs::integers, call == 0, next_seed()),
        "fallback call " + std::to_string(call) + " on a new communicator");
  }
  fresh->close();
}

INSTANTIATE_TEST_SUITE_P(Faults, LateRank,
                         ::testing::Values(Case{Fault::before_call, DataType::bf16},
                                           Case{Fault::before_call, DataType::f16},
                                           Case{Fault::before_call, DataType::f32},
                                           Case{Fault::after_posting, DataType::bf16},
                                           Case{Fault::after_reducing, DataType::bf16}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(to_string(info.param.fault)) + "_" +
                                  to_string(info.param.dtype);
                         });

}  // namespace
}  // namespace peerplan::comm_test
