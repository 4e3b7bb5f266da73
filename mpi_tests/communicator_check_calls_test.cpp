// SPDX-License-Identifier: Apache-2.0
// Config::check_calls (PEERPLAN_CHECK_CALLS): the ranks compare each call
// before it runs. The same calls run as usual; calls that differ in shape or
// eps raise Mismatch on every rank, listing each rank's call, and the
// communicator stays usable; fused calls that differ only in their weight's
// address (every rank has its own) are the same call; and the setting must
// agree on every rank. Host backend, any world size.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "support/communicator_test_support.hpp"
#include "support/mpi_test_support.hpp"

namespace peerplan::comm_test {
namespace {

constexpr std::int64_t kCount = 1024;

Config checking() {
  Config config;
  config.backend = Backend::host;
  config.check_calls = true;
  config.timeout = std::chrono::milliseconds(5000);
  return config;
}

// An all-reduce of `count` floats, each rank's input rank + 1: every sum is
// size * (size + 1) / 2.
CallResult all_reduce_of(Communicator& comm, std::int64_t count) {
  std::vector<float> in(static_cast<std::size_t>(count), static_cast<float>(test_rank() + 1));
  std::vector<float> out(in.size(), -1.0f);
  const CallResult result =
      comm.all_reduce(in.data(), out.data(), DataType::f32, TensorLayout({count}), nullptr);
  const float expected = static_cast<float>(test_size() * (test_size() + 1) / 2);
  std::int64_t wrong = 0;
  for (float v : out) wrong += v != expected;
  EXPECT_EQ(wrong, 0);
  return result;
}

TEST(CheckCalls, SameCallsOnEveryRankRunAsUsual) {
  auto comm = create_on_world(checking());
  comm->declare(std::vector<Declaration>{
      Declaration::all_reduce("x", DataType::f32, TensorLayout({kCount}))});
  for (int call = 0; call < 3; ++call) all_reduce_of(*comm, kCount);
  all_reduce_of(*comm, kCount + 4);  // undeclared: the fallback, compared as well
  const Stats stats = comm->stats();
  EXPECT_EQ(stats.p2p_calls + stats.fallback_undeclared + stats.fallback_over_cutoff +
                stats.fallback_p2p_disabled + stats.fallback_node_layout,
            4u);
  EXPECT_EQ(stats.fallback_undeclared, 1u);
  comm->close();
}

TEST(CheckCalls, DifferentShapesRaiseMismatchOnEveryRankNamingEachCall) {
  PEERPLAN_MPI_SKIP_IF(test_size() < 2, "needs two ranks");
  auto comm = create_on_world(checking());
  const std::int64_t mine = test_rank() == 0 ? kCount : kCount + 8;
  comm->declare(std::vector<Declaration>{
      Declaration::all_reduce("x", DataType::f32, TensorLayout({kCount})),
      Declaration::all_reduce("y", DataType::f32, TensorLayout({kCount + 8}))});
  std::vector<float> in(static_cast<std::size_t>(mine), 1.0f), out(in.size(), -1.0f);
  try {
    comm->all_reduce(in.data(), out.data(), DataType::f32, TensorLayout({mine}), nullptr);
    ADD_FAILURE() << "ranks that made different calls must raise Mismatch";
  } catch (const Mismatch& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("rank 0: all_reduce f32 [1024] strides [1]"), std::string::npos)
        << message;
    EXPECT_NE(message.find("rank 1: all_reduce f32 [1032] strides [1]"), std::string::npos)
        << message;
  }
  for (float v : out) ASSERT_EQ(v, -1.0f) << "nothing may run before the comparison";
  all_reduce_of(*comm, kCount);  // still usable
  comm->close();
}

TEST(CheckCalls, FusedCallsWithTheirOwnWeightsAreTheSameCallButNotWithAnotherEps) {
  PEERPLAN_MPI_SKIP_IF(test_size() < 2, "needs two ranks");
  auto comm = create_on_world(checking());
  const TensorLayout layout({2, 512});
  std::vector<float> weight(512, 1.0f);  // each rank's own address
  comm->declare(std::vector<Declaration>{
      Declaration::fused_add_rms_norm("rows", DataType::f32, layout, weight.data(), 1e-6f)});
  std::vector<float> inout(1024, 1.0f), residual(1024, 0.0f);
  const CallResult same = comm->fused_add_rms_norm(inout.data(), residual.data(), weight.data(),
                                                   1e-6f, DataType::f32, layout, nullptr);
  EXPECT_NE(same.route, Route::fallback);
  const float eps = test_rank() == 0 ? 1e-6f : 1e-5f;
  EXPECT_THROW(comm->fused_add_rms_norm(inout.data(), residual.data(), weight.data(), eps,
                                        DataType::f32, layout, nullptr),
               Mismatch);
  comm->close();
}

TEST(CheckCalls, TheSettingMustAgreeOnEveryRank) {
  PEERPLAN_MPI_SKIP_IF(test_size() < 2, "needs two ranks");
  Config config = checking();
  config.check_calls = test_rank() == 0;
  try {
    create_on_world(config)->close();
    ADD_FAILURE() << "create must fail when the ranks disagree on check_calls";
  } catch (const Mismatch& e) {
    EXPECT_NE(std::string(e.what()).find("check_calls"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace peerplan::comm_test
