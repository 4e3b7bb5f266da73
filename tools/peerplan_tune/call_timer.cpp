// SPDX-License-Identifier: Apache-2.0
#include "call_timer.hpp"

#include <mpi.h>

#include "host_timing.hpp"
#if PEERPLAN_HAVE_CUDA
#include "cuda_call_timing.hpp"
#endif

namespace peerplan::tune {

CallTimer::CallTimer(Backend backend, TimingPlan plan) : backend_(backend), plan_(plan) {
#if PEERPLAN_HAVE_CUDA
  if (backend_ == Backend::cuda) {
    cudaStream_t stream = nullptr;
    bench::check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    stream_ = stream;
  }
#endif
}

CallTimer::~CallTimer() {
#if PEERPLAN_HAVE_CUDA
  if (stream_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
#endif
}

double CallTimer::time(const std::function<void()>& call, bool capturable) {
#if PEERPLAN_HAVE_CUDA
  if (backend_ == Backend::cuda) {
    return bench::time_cuda_calls(call, static_cast<cudaStream_t>(stream_), plan_.iters,
                                  plan_.warmup, plan_.graph && capturable, MPI_COMM_WORLD,
                                  plan_.batches);
  }
#endif
  (void)capturable;  // host calls are never captured
  return time_host_calls(call, plan_.iters, plan_.warmup, plan_.batches, MPI_COMM_WORLD);
}

void CallTimer::synchronize() {
#if PEERPLAN_HAVE_CUDA
  if (stream_ != nullptr)
    bench::check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "sync");
#endif
}

}  // namespace peerplan::tune
