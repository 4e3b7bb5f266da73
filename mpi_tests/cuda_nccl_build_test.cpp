// SPDX-License-Identifier: Apache-2.0
// What a build of the CUDA backend says and does about NCCL, on any machine
// (no GPU needed, so CI runs it): nccl_built() matches the build
// (PEERPLAN_WITH_NCCL at configure time), and in a build without NCCL
// asking for the NCCL fallback fails alike on every rank with Unsupported
// saying what to use instead, before any collective work (the ranks'
// bootstrap stays usable).
#include <mpi.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "bootstrap/mpi_bootstrap.hpp"
#include "peerplan/errors.hpp"
#include "support/mpi_test_support.hpp"
#include "transport/cuda/cuda_backend.hpp"

namespace peerplan {
namespace {

using namespace std::chrono_literals;

TEST(CudaNcclBuild, NcclBuiltMatchesTheBuild) {
  EXPECT_EQ(transport::cuda::nccl_built(), PEERPLAN_HAVE_NCCL == 1);
}

TEST(CudaNcclBuild, NcclFallbackWithoutNcclIsUnsupportedOnEveryRank) {
  PEERPLAN_MPI_SKIP_IF(transport::cuda::nccl_built(),
                       "this build has NCCL: the NCCL fallback itself is tested on GPU hosts "
                       "(cuda_*_test, scripts/gpu-check.sh)");
  auto bootstrap = bootstrap::make_mpi_bootstrap(mpi_test::test_comm(), 10s);
  try {
    (void)transport::cuda::make_nccl_fallback(*bootstrap, 10s, RowClusters::automatic);
    ADD_FAILURE() << "make_nccl_fallback returned in a build without NCCL";
  } catch (const Unsupported& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("has no NCCL"), std::string::npos) << message;
    EXPECT_NE(message.find("PEERPLAN_WITH_NCCL=OFF"), std::string::npos) << message;
    EXPECT_NE(message.find("PEERPLAN_FALLBACK=mpi"), std::string::npos) << message;
  }
  // Nothing collective was started: the ranks are still in step.
  EXPECT_TRUE(bootstrap->agree(true));
}

}  // namespace
}  // namespace peerplan
