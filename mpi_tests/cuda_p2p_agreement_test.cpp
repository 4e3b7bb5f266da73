// SPDX-License-Identifier: Apache-2.0
// P2P set-up failing on one rank only: the others must not enable the fast
// path alone (their kernels would wait for a peer that never comes). The
// failure is the real, common one: the last rank was started with
// CUDA_VISIBLE_DEVICES restricted to its own GPU, so it cannot see (nor map)
// the others' GPUs, while they can see its GPU. Every rank must disable P2P,
// warn why, and still compute correct results through NCCL.
//
// Needs Open MPI (OMPI_COMM_WORLD_* names each process before CUDA starts)
// and one GPU per rank; skipped otherwise.
#include <cstdlib>
#include <string>

#include "support/cuda_all_reduce_check.hpp"
#include "support/cuda_test_support.hpp"

namespace peerplan::cuda_test {
namespace {

// Runs before main(), hence before the first CUDA call of this process.
const bool restricted_last_rank = [] {
  const char* rank_text = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* size_text = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (rank_text == nullptr || size_text == nullptr) return false;
  const int r = std::atoi(rank_text), n = std::atoi(size_text);
  if (n < 2 || r != n - 1) return false;
  ::setenv("CUDA_VISIBLE_DEVICES", std::to_string(r).c_str(), 1);
  return true;
}();

// Why this test cannot run here ("" when it can): it needs Open MPI and a
// GPU of its own for every rank (ranks sharing a GPU never lack peer access).
std::string obstacle() {
  if (std::getenv("OMPI_COMM_WORLD_RANK") == nullptr) {
    return "needs Open MPI (OMPI_COMM_WORLD_RANK restricts the last rank before CUDA starts)";
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  // The restricted rank sees its one GPU; every other rank all of them.
  if (restricted_last_rank ? count == 1 : count >= size()) return "";
  if (restricted_last_rank) {
    return "the last rank sees no GPU " + std::to_string(size() - 1) +
           ": needs one GPU per rank (runs on GPU hosts, scripts/gpu-check.sh)";
  }
  return std::to_string(count) + " GPU(s) for " + std::to_string(size()) +
         " ranks: needs one GPU per rank (runs on GPU hosts, scripts/gpu-check.sh)";
}

TEST(CudaP2PAgreement, OneRankWithoutPeerAccessDisablesP2POnEveryRank) {
  const std::string why_not = obstacle();
  PEERPLAN_MPI_SKIP_IF(!why_not.empty(), why_not);
  Config config;
  config.device = restricted_last_rank ? 0 : rank();
  auto comm = create_cuda(config);
  EXPECT_FALSE(comm->p2p_enabled()) << "rank " << rank() << " enabled P2P alone";
  const std::string reason = comm->p2p_disabled_reason();
  EXPECT_NE(reason.find("rank " + std::to_string(size() - 1)), std::string::npos) << reason;
  EXPECT_NE(reason.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << reason;

  const std::int64_t n = 4096;
  comm->declare(std::vector{Declaration::all_reduce("x", DataType::bf16, vector_of(n))});
  EXPECT_EQ(comm->plan_for(make_all_reduce_key(DataType::bf16, vector_of(n))).route_reason,
            FallbackReason::p2p_disabled);
  check_all_reduce(*comm, DataType::bf16, vector_of(n), Route::fallback);
  check_all_reduce(*comm, DataType::f32, vector_of(1000), Route::fallback);
  comm->close();
}

}  // namespace
}  // namespace peerplan::cuda_test
