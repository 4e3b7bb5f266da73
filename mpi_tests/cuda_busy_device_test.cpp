// SPDX-License-Identifier: Apache-2.0
// The CUDA backend beside GPU work that does not end (as far as peerplan can
// tell: a host function on one of the application's streams that returns only
// when the test lets it, as a kernel of another library or a fallback call a
// peer never made would hold the GPU). A create() made again then, its first
// declare(), register_buffers() and a P2P call on a stream of the
// application's own wait for none of it: each returns in time, while the work
// is still held, and the call's sums are right; so do fallback (MPI) calls,
// the second of which grows the fallback's buffers. Any world size from 2 to
// 8, one GPU per rank or shared. Skipped (on every rank) without GPUs.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "peerplan/half_conversion.hpp"
#include "support/cuda_test_support.hpp"

namespace peerplan::cuda_test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kTimeout{1500};
// Each step takes milliseconds; one that waited for the held work would take
// until the test released it (after every step) or kHold.
constexpr milliseconds kBound{8000};
// The held work's own limit, so that a failing test never leaves the GPU held.
constexpr std::chrono::seconds kHold{20};
constexpr std::int64_t kCount = 8192;

// Work queued on a blocking stream (the default flags, as an application's)
// that does not end until release(): cudaDeviceSynchronize, cudaFree and
// copies on the legacy stream wait for it.
class HeldWork {
 public:
  HeldWork() {
    check_cuda(cudaStreamCreate(&stream_), "cudaStreamCreate");
    check_cuda(cudaLaunchHostFunc(stream_, &hold, this), "cudaLaunchHostFunc");
  }
  ~HeldWork() {
    release();
    cudaStreamDestroy(stream_);
  }
  HeldWork(const HeldWork&) = delete;
  HeldWork& operator=(const HeldWork&) = delete;
  bool still_held() const { return !ended_.load(); }
  void release() {
    released_ = true;
    cudaStreamSynchronize(stream_);
  }

 private:
  static void CUDART_CB hold(void* self) {
    auto* work = static_cast<HeldWork*>(self);
    const auto until = Clock::now() + kHold;
    while (!work->released_.load() && Clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    work->ended_ = true;
  }

  cudaStream_t stream_ = nullptr;
  std::atomic<bool> released_{false};
  std::atomic<bool> ended_{false};
};

// An all-reduce of `count` ones in `data` on `own` (a shape no declaration
// covers: the MPI fallback), whose sums must be the rank count. `data` is
// allocated beforehand: freeing device memory waits for the GPU.
void fallback_call(Communicator& comm, const DeviceBuffer& data, std::int64_t count,
                   cudaStream_t own) {
  const std::size_t bytes = static_cast<std::size_t>(count) * 2;
  const std::vector<std::uint16_t> ones(static_cast<std::size_t>(count), float_to_bf16_bits(1.0f));
  check_cuda(cudaMemcpyAsync(data.ptr, ones.data(), bytes, cudaMemcpyHostToDevice, own), "upload");
  const CallResult result =
      comm.all_reduce(data.ptr, data.ptr, DataType::bf16, TensorLayout({count}), own);
  EXPECT_EQ(result.route, Route::fallback);
  std::vector<std::uint16_t> got(static_cast<std::size_t>(count));
  check_cuda(cudaMemcpyAsync(got.data(), data.ptr, bytes, cudaMemcpyDeviceToHost, own), "download");
  check_cuda(cudaStreamSynchronize(own), "the fallback call");
  const std::uint16_t expected = float_to_bf16_bits(static_cast<float>(size()));
  EXPECT_EQ(std::count(got.begin(), got.end(), expected), count);
}

// Config of both rounds: pull mode reads registered inputs in place; the MPI
// fallback keeps NCCL's own waits (docs/faults.md) out of the test.
Config busy_config() {
  Config config;
  config.timeout = kTimeout;
  config.transfer_mode = TransferMode::pull;
  config.fallback = Fallback::mpi;
  return config;
}

// create(), declare(), register_buffers(), a zero-copy all-reduce of `pool`
// on `own` (a non-blocking stream) and two fallback calls in `large`, each
// passed to `step`; the sums are checked. Returns the communicator, registered.
template <class Step>
std::unique_ptr<Communicator> run_until_the_call(const DeviceBuffer& pool, const DeviceBuffer& out,
                                                 const DeviceBuffer& large, cudaStream_t own,
                                                 Step&& step) {
  std::unique_ptr<Communicator> comm;
  step("create", [&] { comm = create_cuda(busy_config()); });
  if (!comm) return comm;
  EXPECT_TRUE(comm->p2p_enabled()) << comm->p2p_disabled_reason();
  const std::vector<Declaration> declared{
      Declaration::all_reduce("x", DataType::bf16, TensorLayout({kCount}))};
  step("declare", [&] { comm->declare(declared); });
  const BufferRegion registered{pool.ptr, pool.bytes};
  step("register_buffers", [&] { comm->register_buffers(std::span(&registered, 1)); });
  CallResult result;
  std::vector<std::uint8_t> got(pool.bytes);
  step("all_reduce on a non-blocking stream", [&] {
    result = comm->all_reduce(pool.ptr, out.ptr, DataType::bf16, TensorLayout({kCount}), own);
    check_cuda(cudaMemcpyAsync(got.data(), out.ptr, got.size(), cudaMemcpyDeviceToHost, own),
               "download");
    check_cuda(cudaStreamSynchronize(own), "the call");
  });
  EXPECT_TRUE(result.zero_copy);
  EXPECT_EQ(wrong_sums(DataType::bf16, got, kCount, 11), 0);
  // Undeclared shapes go to the MPI fallback; the second grows its buffers.
  for (std::int64_t count : {kCount * 2, kCount * 8}) {
    step("a fallback call", [&] { fallback_call(*comm, large, count, own); });
  }
  return comm;
}

// As in an application that retries create() after a fault left a kernel
// running: the first round, on an idle GPU, loads the kernels (with CUDA's
// lazy loading, the default, a process's first use of a kernel waits for
// the GPU to be idle: docs/faults.md); the second round runs with the work held.
TEST(CudaBusyDevice, CreateDeclareRegisterAndACallDoNotWaitForOtherWorkOnTheGpu) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  ensure_cuda_contexts();
  check_cuda(cudaSetDevice(device_of_this_rank()), "cudaSetDevice");
  cudaStream_t own = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  // Memory and the input before the work is held: the test's own steps use
  // only the non-blocking stream from then on.
  const std::size_t bytes = kCount * 2;
  DeviceBuffer pool(bytes), out(bytes), large(bytes * 8);
  const auto input = random_tensor(DataType::bf16, kCount, 11, rank());
  check_cuda(cudaMemcpyAsync(pool.ptr, input.data(), bytes, cudaMemcpyHostToDevice, own), "upload");
  check_cuda(cudaStreamSynchronize(own), "upload");

  auto untimed = [](const char*, auto&& run) { run(); };
  auto first = run_until_the_call(pool, out, large, own, untimed);
  ASSERT_TRUE(first);
  first->deregister_buffers();
  first->close();

  std::optional<HeldWork> held;
  held.emplace();
  MPI_Barrier(test_comm());
  auto in_time = [&](const char* step, auto&& run) {
    const auto start = Clock::now();
    run();
    const auto took = Clock::now() - start;
    EXPECT_LT(took, kBound) << step << " took "
                            << std::chrono::duration_cast<milliseconds>(took).count() << " ms";
    EXPECT_TRUE(held->still_held()) << step << " returned only once the held work had ended";
  };
  auto comm = run_until_the_call(pool, out, large, own, in_time);

  held.reset();  // released: what follows may wait for the GPU
  MPI_Barrier(test_comm());
  if (comm) {
    comm->deregister_buffers();
    comm->close();
  }
  cudaStreamDestroy(own);
}

}  // namespace
}  // namespace peerplan::cuda_test
