// SPDX-License-Identifier: Apache-2.0
// Bounded waits for the CUDA backend's teardown (close() and destructors),
// and for the releases before it that every rank makes together
// (idle_gpus.hpp).
//
// Some CUDA and NCCL calls that teardown needs can block for as long as the
// GPU keeps running something: cudaDeviceSynchronize and cudaFree wait for
// every kernel of the device, NCCL's abort and destroy wait for the work of
// their communicator. A kernel that never ends (a fallback call that a peer
// never made, someone else's kernel spinning) would make close() hang. These
// helpers run such a call on a helper thread and wait for it only until a
// deadline; past it, the caller gives up and leaves the resources the call
// was about to release allocated (freeing memory that a running kernel may
// still touch is worse than leaking it).
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "transport/cuda/cuda_check.hpp"

namespace peerplan::transport::cuda {

using TeardownClock = std::chrono::steady_clock;

// Time granted beyond the timeout to work that the timeout itself bounds: a
// P2P kernel gives up waiting after the timeout and still has to exit; an
// aborted NCCL communicator still has to stop its threads.
inline constexpr std::chrono::milliseconds kTeardownMargin{2000};

// Runs `work` on a helper thread and waits for it until `deadline`. Returns
// true when it finished in time. Otherwise the helper thread is left running,
// detached, owning what `work` captured (copy what it needs into it): the
// caller must not release anything `work` still uses. Returns false without
// running `work` when no thread can be started. `work` must not throw.
bool run_until(std::function<void()> work, TeardownClock::time_point deadline);

// True when everything queued on `device` before the call (every stream of
// the process, CUDA-graph launches included) has finished by `deadline`: a
// cudaDeviceSynchronize on a helper thread. While an earlier such wait on the
// device is still blocked, it is joined instead of starting another thread.
// A device in a sticky error state counts as idle (nothing runs on it).
bool device_idle_by(int device, TeardownClock::time_point deadline);

// The device that `pointer` (device or mapped host memory) belongs to, else
// the calling thread's current device. Never throws.
int device_of(const void* pointer) noexcept;

// Polls `ready` (a cudaStreamQuery or cudaEventQuery) until it says done or
// `timeout` passes. Returns false on timeout; throws CudaError on an error.
// For the waits of calls (not of teardown): the MPI steps that stage GPU
// data through the host.
template <class Query>
bool poll_until_done(Query ready, std::chrono::milliseconds timeout, const char* what) {
  const auto deadline = TeardownClock::now() + timeout;
  for (int polls = 0;; ++polls) {
    const cudaError_t status = ready();
    if (status == cudaSuccess) return true;
    if (status != cudaErrorNotReady) check_cuda(status, what);
    if (TeardownClock::now() >= deadline) return false;
    // Short waits are the common case (a copy of a few KiB); ranks sharing
    // a GPU wait for time slices of milliseconds.
    if (polls < 100) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(polls < 1000 ? 20 : 200));
    }
  }
}

// A stream of its own for a step that must wait for nothing but its own
// work: non-blocking, so it waits for no other stream's (which may never
// end), and destroyed without waiting (CUDA releases it once its work is
// done).
class OwnStream {
 public:
  // `what`: the step, for the error when no stream can be made (CudaError).
  explicit OwnStream(const std::string& what) {
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
               "creating a stream for " + what);
  }
  ~OwnStream() { cudaStreamDestroy(stream_); }
  OwnStream(const OwnStream&) = delete;
  OwnStream& operator=(const OwnStream&) = delete;

  cudaStream_t get() const noexcept { return stream_; }
  // Whether its work finished within `bound` (poll_until_done).
  bool finished_within(std::chrono::milliseconds bound, const char* what) const {
    return poll_until_done([stream = stream_] { return cudaStreamQuery(stream); }, bound, what);
  }

 private:
  cudaStream_t stream_ = nullptr;
};

// "2000 ms"
std::string milliseconds_text(std::chrono::milliseconds duration);

}  // namespace peerplan::transport::cuda
