// SPDX-License-Identifier: Apache-2.0
// Config::check_calls on the CUDA backend, whose P2P kernels cannot tell
// different calls apart (docs/faults.md): ranks that call different shapes
// of two declared plans raise Mismatch together before any kernel runs (the
// outputs stay as they were), and the next call, the same on every rank,
// gives the right sums. Any world size from 2 to 8, one GPU per rank or
// shared. Skipped (on every rank) without GPUs.
#include <string>

#include "support/cuda_test_support.hpp"

namespace peerplan::cuda_test {
namespace {

constexpr std::int64_t kCount = 4096;

TEST(CudaCheckCalls, DifferentShapesRaiseMismatchBeforeAnyKernelRuns) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  Config config;
  config.check_calls = true;
  config.timeout = std::chrono::milliseconds(5000);
  auto comm = create_cuda(config);
  ASSERT_TRUE(comm->p2p_enabled()) << comm->p2p_disabled_reason();
  comm->declare(std::vector<Declaration>{
      Declaration::all_reduce("x", DataType::bf16, TensorLayout({kCount})),
      Declaration::all_reduce("y", DataType::bf16, TensorLayout({kCount + 64}))});
  const std::int64_t mine = rank() == 0 ? kCount : kCount + 64;
  DeviceBuffer in((kCount + 64) * 2), out((kCount + 64) * 2);
  in.upload(random_tensor(DataType::bf16, kCount + 64, 5, rank()));
  out.poison();
  try {
    comm->all_reduce(in.ptr, out.ptr, DataType::bf16, TensorLayout({mine}), nullptr);
    ADD_FAILURE() << "ranks that made different calls must raise Mismatch";
  } catch (const Mismatch& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0: all_reduce bf16 [4096]"), std::string::npos)
        << e.what();
  }
  check_cuda(cudaDeviceSynchronize(), "sync");
  const auto untouched = out.download(static_cast<std::size_t>(kCount + 64) * 2);
  std::int64_t written = 0;
  for (std::uint8_t byte : untouched) written += byte != 0xff;
  EXPECT_EQ(written, 0) << "no kernel may run before the comparison";

  const auto result =
      comm->all_reduce(in.ptr, out.ptr, DataType::bf16, TensorLayout({kCount}), nullptr);
  EXPECT_EQ(result.route, Route::one_shot);
  check_cuda(cudaDeviceSynchronize(), "sync");
  EXPECT_EQ(wrong_sums(DataType::bf16, out.download(kCount * 2), kCount, 5), 0);
  comm->close();
}

}  // namespace
}  // namespace peerplan::cuda_test
