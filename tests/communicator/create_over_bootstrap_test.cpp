// SPDX-License-Identifier: Apache-2.0
// The internal create over a caller's bootstrap (the NCCL interposer's):
// no MPI on its path (this test never initialises MPI), no fallback of its
// own. Its success needs GPUs (the cuda backend only); here, what it
// refuses, on every rank alike.
#include "communicator/create_over_bootstrap.hpp"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <thread>

#include "../transport/thread_bootstrap.hpp"
#include "communicator/no_fallback.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::communicator {
namespace {

using transport::testing::ThreadBootstrap;
using transport::testing::ThreadGroup;

TEST(CreateOverBootstrap, RefusesTheHostBackendOnEveryRankWithoutMpi) {
  constexpr int kRanks = 2;
  ThreadGroup group(kRanks);
  std::array<std::string, kRanks> errors;
  std::array<std::thread, kRanks> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks[r] = std::thread([&, r] {
      Config config;
      config.backend = Backend::host;
      config.timeout = std::chrono::seconds(20);
      try {
        create_over_bootstrap(std::make_unique<ThreadBootstrap>(group, r, config.timeout), config);
        errors[r] = "created";
      } catch (const Unsupported& e) {
        errors[r] = e.what();
      } catch (const std::exception& e) {
        errors[r] = std::string("other error: ") + e.what();
      }
    });
  }
  for (auto& rank : ranks) rank.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_NE(errors[r].find("runs on the cuda backend only"), std::string::npos)
        << "rank " << r << ": " << errors[r];
  }
}

TEST(CreateOverBootstrap, RefusesANullBootstrap) {
  EXPECT_THROW(create_over_bootstrap(nullptr, Config{}), InvalidArgument);
}

TEST(NoFallback, RefusesEveryCallWithInvalidUsage) {
  auto fallback = make_no_fallback();
  const TensorLayout layout{4};
  float data[4] = {};
  const transport::AllReduceArgs all_reduce{data, data, DataType::f32, &layout, nullptr};
  try {
    fallback->all_reduce(all_reduce);
    FAIL() << "all_reduce was not refused";
  } catch (const InvalidUsage& e) {
    EXPECT_NE(std::string(e.what()).find("has none"), std::string::npos) << e.what();
  }
  const transport::FusedArgs fused{data, data, data, 1e-6f, DataType::f32, &layout, nullptr};
  EXPECT_THROW(fallback->fused_add_rms_norm(fused), InvalidUsage);
  EXPECT_NO_THROW(fallback->close());
}

}  // namespace
}  // namespace peerplan::communicator
