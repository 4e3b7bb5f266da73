// SPDX-License-Identifier: Apache-2.0
// Timing of collective calls on a CUDA stream, shared by the collective
// benchmark and peerplan_tune: CUDA events around batches of eager calls or
// of CUDA-graph replays, the median batch, and the slowest rank's median
// reported on every rank (as nccl-tests does), so every rank holds the same
// numbers. Eager batches are also timed on the host (a steady clock around
// the loop of calls, before waiting on the stop event): what the calling
// thread pays per call for lookup, admission and launch. Header-only; needs
// the CUDA runtime and MPI.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

namespace peerplan::bench {

inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

// A graph holds this many calls, as decode steps do, so graph launch
// overhead is amortised the same way for every route, and the per-call
// times compare with other libraries' graph-replay numbers.
inline constexpr int kCallsPerGraph = 20;

struct CudaCallTiming {
  // Median over the batches of the mean device time per call (µs, CUDA
  // events), the slowest rank's.
  double us_per_call = 0;
  // Median over the batches of the host time per call (ns, steady clock
  // around the loop that issues the batch, before waiting on its stop
  // event), the slowest rank's: eager calls, or with `graph` the graph
  // launches divided by the calls they hold.
  double host_ns_per_call = 0;
};

// Times `iters` calls per batch: eager launches, or with `graph` a graph of
// kCallsPerGraph captured calls replayed iters / kCallsPerGraph times.
// Collective over `comm` (a barrier before each batch, and the maximum of
// the ranks' medians).
inline CudaCallTiming time_cuda_calls_detailed(const std::function<void()>& call,
                                               cudaStream_t stream, int iters, int warmup,
                                               bool graph, MPI_Comm comm = MPI_COMM_WORLD,
                                               int batches = 7) {
  for (int i = 0; i < warmup; ++i) call();
  check_cuda(cudaStreamSynchronize(stream), "warmup");
  cudaGraphExec_t exec = nullptr;
  cudaGraph_t g = nullptr;
  const int replays = std::max(1, iters / kCallsPerGraph);
  if (graph) {
    check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
    for (int i = 0; i < kCallsPerGraph; ++i) call();
    check_cuda(cudaStreamEndCapture(stream, &g), "end capture");
    check_cuda(cudaGraphInstantiate(&exec, g, 0), "instantiate");
    for (int i = 0; i < warmup; ++i) check_cuda(cudaGraphLaunch(exec, stream), "replay");
  }
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> per_call, host_per_call;
  const int calls = graph ? replays * kCallsPerGraph : iters;
  for (int b = 0; b < batches; ++b) {
    check_cuda(cudaStreamSynchronize(stream), "sync");
    MPI_Barrier(comm);
    cudaEventRecord(start, stream);
    const auto t0 = std::chrono::steady_clock::now();
    if (graph) {
      for (int i = 0; i < replays; ++i) check_cuda(cudaGraphLaunch(exec, stream), "replay");
    } else {
      for (int i = 0; i < iters; ++i) call();
    }
    const auto t1 = std::chrono::steady_clock::now();
    cudaEventRecord(stop, stream);
    check_cuda(cudaEventSynchronize(stop), "event");
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    per_call.push_back(1000.0 * ms / calls);
    host_per_call.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / calls);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (exec) cudaGraphExecDestroy(exec);
  if (g) cudaGraphDestroy(g);
  std::sort(per_call.begin(), per_call.end());
  std::sort(host_per_call.begin(), host_per_call.end());
  double medians[2] = {per_call[per_call.size() / 2], host_per_call[host_per_call.size() / 2]};
  MPI_Allreduce(MPI_IN_PLACE, medians, 2, MPI_DOUBLE, MPI_MAX, comm);
  return {medians[0], medians[1]};
}

// The device time alone (µs per call): time_cuda_calls_detailed's
// us_per_call.
inline double time_cuda_calls(const std::function<void()>& call, cudaStream_t stream, int iters,
                              int warmup, bool graph, MPI_Comm comm = MPI_COMM_WORLD,
                              int batches = 7) {
  return time_cuda_calls_detailed(call, stream, iters, warmup, graph, comm, batches).us_per_call;
}

}  // namespace peerplan::bench
