// Timing of collective calls on a CUDA stream, shared by the collective
// benchmark and peerplan_tune: CUDA events around batches of eager calls or
// of CUDA-graph replays, the median batch, and the slowest rank's median
// reported on every rank (as nccl-tests does), so every rank holds the same
// numbers. Header-only; needs the CUDA runtime and MPI.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
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
// overhead is amortised the same way for every route (and as in the
// anchors of DESIGN §8).
inline constexpr int kCallsPerGraph = 20;

// Median over `batches` of the mean time per call of `iters` calls (µs):
// eager launches, or with `graph` a graph of kCallsPerGraph captured calls
// replayed iters / kCallsPerGraph times. Collective over `comm` (a barrier
// before each batch, and the maximum of the ranks' medians).
inline double time_cuda_calls(const std::function<void()>& call, cudaStream_t stream, int iters,
                              int warmup, bool graph, MPI_Comm comm = MPI_COMM_WORLD,
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
  std::vector<double> per_call;
  for (int b = 0; b < batches; ++b) {
    check_cuda(cudaStreamSynchronize(stream), "sync");
    MPI_Barrier(comm);
    cudaEventRecord(start, stream);
    if (graph) {
      for (int i = 0; i < replays; ++i) check_cuda(cudaGraphLaunch(exec, stream), "replay");
    } else {
      for (int i = 0; i < iters; ++i) call();
    }
    cudaEventRecord(stop, stream);
    check_cuda(cudaEventSynchronize(stop), "event");
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    per_call.push_back(1000.0 * ms / (graph ? replays * kCallsPerGraph : iters));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (exec) cudaGraphExecDestroy(exec);
  if (g) cudaGraphDestroy(g);
  std::sort(per_call.begin(), per_call.end());
  double median = per_call[per_call.size() / 2];
  MPI_Allreduce(MPI_IN_PLACE, &median, 1, MPI_DOUBLE, MPI_MAX, comm);
  return median;
}

}  // namespace peerplan::bench
