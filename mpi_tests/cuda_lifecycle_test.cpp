// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's lifecycle on real GPUs: a rank that stops calling
// makes the others raise Timeout (never hang) and the next declare()
// recovers; 200 declare/refresh cycles (40 where ranks share a GPU; and
// close/create) return device memory to its baseline. Any world size from 2
// to 8, one GPU per rank or shared. Skipped (on every rank) without GPUs.
#include <chrono>
#include <string>
#include <thread>

#include "support/cuda_all_reduce_check.hpp"
#include "support/cuda_test_support.hpp"

namespace peerplan::cuda_test {
namespace {

std::vector<std::uint8_t> all_reduce_bytes(Communicator& comm, std::int64_t n, std::uint64_t seed,
                                           Route expected) {
  DeviceBuffer in(n * 2), out(n * 2);
  in.upload(random_tensor(DataType::bf16, n, seed, rank()));
  out.poison();
  const auto result = comm.all_reduce(in.ptr, out.ptr, DataType::bf16, TensorLayout({n}), nullptr);
  EXPECT_EQ(result.route, expected);
  check_cuda(cudaDeviceSynchronize(), "sync");
  auto got = out.download(n * 2);
  EXPECT_EQ(wrong_sums(DataType::bf16, got, n, seed), 0);
  return got;
}

// A communicator with a 1.5 s timeout on P2P routes, `x` declared and called
// once (call #1). A P2P kernel's bounded wait is what these check (the
// fallback's has tests of its own). Skipped visibly without GPUs.
class CudaTimeout : public ::testing::Test {
 protected:
  static constexpr std::int64_t n = 8192;

  void SetUp() override {
    PEERPLAN_SKIP_WITHOUT_GPUS();
    config_.timeout = std::chrono::milliseconds(1500);
    comm_ = create_cuda(config_);
    ASSERT_TRUE(comm_->p2p_enabled()) << comm_->p2p_disabled_reason();
    comm_->declare(declared_);
    all_reduce_bytes(*comm_, n, 1, Route::one_shot);
  }

  // After the failed calls: the next declare() re-creates the slabs and
  // epochs on every rank, and calls give the same bytes everywhere again.
  void expect_declare_recovers() {
    MPI_Barrier(test_comm());
    comm_->declare(declared_);
    EXPECT_TRUE(same_on_every_rank(all_reduce_bytes(*comm_, n, 3, Route::one_shot)));
    comm_->close();
  }

  Config config_;
  std::unique_ptr<Communicator> comm_;
  const std::vector<Declaration> declared_{
      Declaration::all_reduce("x", DataType::bf16, TensorLayout({n}))};
};

TEST_F(CudaTimeout, RankThatStopsCallingMakesTheOthersRaiseTimeoutThenDeclareRecovers) {
  const bool stops = rank() == size() - 1;
  std::string message;
  bool timed_out = false;
  if (!stops) {
    DeviceBuffer in(n * 2), out(n * 2);
    in.upload(random_tensor(DataType::bf16, n, 2, rank()));
    const auto start = std::chrono::steady_clock::now();
    comm_->all_reduce(in.ptr, out.ptr, DataType::bf16, TensorLayout({n}), nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "the kernel must exit, not trap";
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_GE(waited, std::chrono::milliseconds(1000));
    EXPECT_LT(waited, std::chrono::milliseconds(20000));
    try {
      comm_->all_reduce(in.ptr, out.ptr, DataType::bf16, TensorLayout({n}), nullptr);
    } catch (const Timeout& e) {
      timed_out = true;
      message = e.what();
    }
    EXPECT_TRUE(timed_out) << "the call after the abandoned one must raise Timeout";
    EXPECT_NE(message.find("rank " + std::to_string(size() - 1)), std::string::npos) << message;
    EXPECT_NE(message.find("PEERPLAN_TIMEOUT_MS"), std::string::npos) << message;
  }
  expect_declare_recovers();
}

// The late rank's call: its peers' kernels published their input, then gave
// up waiting for it. Their flags are all there, but the late rank must not
// complete a call its peers reported as failed: every rank's Timeout names
// the same call (#2), none names #3 (the late rank failing only the call
// after).
TEST_F(CudaTimeout, RankLateForACallItsPeersGaveUpOnFailsThatCallToo) {
  ASSERT_NO_FATAL_FAILURE(expect_every_rank_fails_the_call_the_last_rank_is_late_for(
      *comm_, n, config_.timeout, "P2P call #2 "));
  expect_declare_recovers();
}

// Free memory of this rank's GPU once every rank has reached this point:
// ranks sharing the GPU allocate and free theirs at other moments.
std::size_t free_device_memory() {
  std::size_t free_bytes = 0, total = 0;
  check_cuda(cudaDeviceSynchronize(), "sync");
  MPI_Barrier(test_comm());
  check_cuda(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  MPI_Barrier(test_comm());
  return free_bytes;
}

// The device a communicator reports is the one create() picked and left
// current: the local rank's by default, Config::device when set.
TEST(CudaLifecycle, ReportsTheDeviceItDrives) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const int expected = device_of_this_rank();
  auto comm = create_cuda();
  EXPECT_EQ(comm->cuda_device(), expected);
  int current = -1;
  CUDA_OK(cudaGetDevice(&current));
  EXPECT_EQ(current, expected);
  comm->close();

  int count = 0;
  CUDA_OK(cudaGetDeviceCount(&count));
  Config config;
  config.device = count - 1;  // the same on every rank: the ranks then share that GPU
  auto on_last = create_cuda(config);
  EXPECT_EQ(on_last->cuda_device(), count - 1);
  on_last->close();
}

TEST(CudaLifecycle, TwoHundredDeclareRefreshCloseCyclesReturnMemoryToBaseline) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  bool shared = false;
  {  // warm-up: CUDA context, NCCL's one-time state
    auto comm = create_cuda(forcing(Route::two_shot));
    shared = gpus_shared(*comm);
    comm->declare(std::vector<Declaration>{
        Declaration::all_reduce("w", DataType::bf16, TensorLayout({1024}))});
    all_reduce_bytes(*comm, 1024, 9, Route::two_shot);
    comm->close();
  }
  // Each declare is a few collective steps, each slow when ranks time-slice
  // one GPU: fewer cycles there, still several close/create rounds.
  const int cycles = shared ? 40 : 200;
  const int close_every = shared ? 10 : 50;
  // cudaMemGetInfo counts the whole GPU: every rank on it may leave its share.
  const int ranks_here = ranks_on_my_gpu();
  const std::size_t baseline = free_device_memory();
  std::unique_ptr<Communicator> comm;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    if (!comm) comm = create_cuda(forcing(Route::two_shot));
    // 4, 8 or 16 MiB: every refresh changes the capacity, so slabs are re-created.
    const std::int64_t n = (std::int64_t{2} << 20) << (cycle % 3);
    comm->declare(
        std::vector<Declaration>{Declaration::all_reduce("c", DataType::bf16, TensorLayout({n}))});
    if (cycle % 20 == 0) all_reduce_bytes(*comm, n, 100 + cycle, Route::two_shot);
    if (cycle % close_every == close_every - 1) {  // the last cycle closes too
      comm->close();
      comm.reset();
    }
  }
  ASSERT_EQ(comm, nullptr);
  const std::size_t after = free_device_memory();
  const double leaked_mib =
      (static_cast<double>(baseline) - static_cast<double>(after)) / (1 << 20);
  EXPECT_LT(leaked_mib, 64.0 * ranks_here)
      << "device memory not returned after " << cycles << " cycles: " << leaked_mib
      << " MiB below baseline on a GPU driven by " << ranks_here << " rank(s)";
}

}  // namespace
}  // namespace peerplan::cuda_test
