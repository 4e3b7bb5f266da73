// SPDX-License-Identifier: Apache-2.0
// One thread at a time per communicator: a call made while another thread of
// the same rank is inside a call on the same communicator raises InvalidUsage
// naming the rule, instead of mixing the two calls' collectives (wrong sums on
// the fallback, a timeout on P2P). The guard is released on every exit,
// exceptions included.
//
// Determinism: on rank 0 two threads make the same all-reduce while the
// other ranks hold back. Whichever thread gets in first waits inside the
// call for the other ranks, so the second one must come back by itself,
// with InvalidUsage. While the first is still waiting, every other guarded
// entry point is tried too. Only then do the other ranks make their call,
// which completes the first thread's.
#include <mpi.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "support/communicator_test_support.hpp"
#include "support/mpi_test_support.hpp"

namespace peerplan::comm_test {
namespace {

using namespace std::chrono_literals;

constexpr float kEps = 1e-6f;
const std::string kRule = "one thread at a time per communicator";

// What one call made on this rank returned.
struct Attempt {
  std::atomic<bool> done{false};
  ErrorCode code = ErrorCode::ok;
  std::string message;
};

void attempt(Attempt& a, const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    a.code = e.code();
    a.message = e.what();
  } catch (const std::exception& e) {
    a.code = ErrorCode::internal;
    a.message = std::string("not a peerplan::Error: ") + e.what();
  }
  a.done.store(true, std::memory_order_release);
}

void expect_refused(const std::string& what, const std::function<void()>& call) {
  Attempt a;
  attempt(a, call);
  EXPECT_EQ(a.code, ErrorCode::invalid_usage)
      << what << " while another thread is inside a call: "
      << (a.message.empty() ? std::string("accepted") : a.message);
  EXPECT_NE(a.message.find(kRule), std::string::npos) << what << ": " << a.message;
}

class CommunicatorThreads : public ::testing::TestWithParam<bool> {};

TEST_P(CommunicatorThreads, ASecondThreadInACallGetsInvalidUsage) {
  const bool declared = GetParam();
  PEERPLAN_MPI_SKIP_IF(mpi_test::thread_level() < MPI_THREAD_MULTIPLE,
                       "MPI was not initialised with MPI_THREAD_MULTIPLE");
  PEERPLAN_MPI_SKIP_IF(declared && !all_ranks_on_one_node(), "P2P routes need one node");
  Config config;
  config.timeout = 10s;  // bounds the broken (unguarded) case
  auto comm = create_on_world(config);
  const TensorLayout layout{2, 64};
  if (declared) {
    comm->declare(std::vector<Declaration>{Declaration::all_reduce("ar", DataType::f32, layout)});
    ASSERT_TRUE(comm->p2p_enabled());
  }
  const int n = comm->size();
  const std::vector<float> expected(128, static_cast<float>(n));

  if (comm->rank() == 0) {
    Attempt first, second;
    std::vector<float> first_data(128, 1.0f), second_data(128, 1.0f);
    std::thread one(attempt, std::ref(first), [&] {
      comm->all_reduce(first_data.data(), first_data.data(), DataType::f32, layout);
    });
    std::thread two(attempt, std::ref(second), [&] {
      comm->all_reduce(second_data.data(), second_data.data(), DataType::f32, layout);
    });
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!first.done.load(std::memory_order_acquire) &&
           !second.done.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    // (No ASSERT before the threads are joined: returning early would
    // destroy joinable threads.)
    const bool one_came_back = first.done || second.done;
    EXPECT_TRUE(one_came_back) << "neither thread came back within 5 s while the other ranks "
                                  "held back: both are inside a collective on one communicator";
    Attempt* refused = first.done ? &first : &second;
    Attempt* running = refused == &first ? &second : &first;
    EXPECT_EQ(refused->code, ErrorCode::invalid_usage) << refused->message;
    EXPECT_NE(refused->message.find(kRule), std::string::npos) << refused->message;
    EXPECT_NE(refused->message.find("all_reduce"), std::string::npos) << refused->message;

    if (one_came_back && refused->code == ErrorCode::invalid_usage && !running->done) {
      // The other thread is known to be inside its call: every guarded
      // entry point is refused meanwhile.
      std::vector<float> inout(128, 1.0f), residual(128, 0.0f);
      const Buffer weight = make_weight(DataType::f32, 64, 5);
      expect_refused("all_reduce",
                     [&] { comm->all_reduce(inout.data(), inout.data(), DataType::f32, layout); });
      expect_refused("fused_add_rms_norm", [&] {
        comm->fused_add_rms_norm(inout.data(), residual.data(), weight.data(), kEps, DataType::f32,
                                 layout);
      });
      expect_refused("declare", [&] { comm->declare(std::vector<Declaration>{}); });
      expect_refused("register_buffers",
                     [&] { comm->register_buffers(std::vector<BufferRegion>{}); });
      expect_refused("deregister_buffers", [&] { comm->deregister_buffers(); });
      expect_refused("close", [&] { comm->close(); });
      EXPECT_FALSE(comm->is_closed());
      EXPECT_EQ(inout, std::vector<float>(128, 1.0f)) << "a refused call wrote";
    }

    int go = 1;
    MPI_Bcast(&go, 1, MPI_INT, 0, test_comm());  // the others make the matching call now
    one.join();
    two.join();
    EXPECT_EQ(running->code, ErrorCode::ok) << running->message;
    EXPECT_EQ(running == &first ? first_data : second_data, expected);
    EXPECT_EQ(refused == &first ? first_data : second_data, std::vector<float>(128, 1.0f))
        << "the refused call wrote";
  } else {
    int go = 0;
    MPI_Bcast(&go, 1, MPI_INT, 0, test_comm());
    std::vector<float> data(128, 1.0f);
    EXPECT_NO_THROW(comm->all_reduce(data.data(), data.data(), DataType::f32, layout));
    EXPECT_EQ(data, expected);
  }

  // The guard was released: calls go on as usual, then close.
  const AllReduceOutcome o =
      run_all_reduce(*comm, DataType::f32, layout, Inputs::integers, false, next_seed());
  expect_all_reduce_correct(o, "a call after the refused one");
  EXPECT_NO_THROW(comm->close());
}

INSTANTIATE_TEST_SUITE_P(Routes, CommunicatorThreads, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "declared_p2p" : "undeclared_fallback");
                         });

// A call that throws releases the guard: the next call on the same thread,
// and on another thread, runs.
TEST(CommunicatorThreadsGuard, ReleasedWhenACallThrows) {
  auto comm = create_on_world();
  std::vector<float> data(128, 1.0f);
  EXPECT_THROW(comm->all_reduce(data.data(), data.data(), DataType::f32, {2, -64}),
               InvalidArgument);
  EXPECT_THROW(comm->declare(std::vector<Declaration>{
                   Declaration::all_reduce("", DataType::f32, TensorLayout{2, 64})}),
               InvalidArgument);
  std::thread other([&] {
    const AllReduceOutcome o =
        run_all_reduce(*comm, DataType::f32, TensorLayout{2, 64}, Inputs::integers, false, 77);
    EXPECT_EQ(o.wrong, 0);
  });
  other.join();
  const AllReduceOutcome o = run_all_reduce(*comm, DataType::f32, TensorLayout{2, 64},
                                            Inputs::integers, true, next_seed());
  expect_all_reduce_correct(o, "after calls that threw");
  comm->close();
}

}  // namespace
}  // namespace peerplan::comm_test
