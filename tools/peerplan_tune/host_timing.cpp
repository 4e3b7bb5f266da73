// SPDX-License-Identifier: Apache-2.0
#include "host_timing.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

namespace peerplan::tune {

double time_host_calls(const std::function<void()>& call, int iters, int warmup, int batches,
                       MPI_Comm comm) {
  for (int i = 0; i < warmup; ++i) call();
  std::vector<double> per_call;
  for (int b = 0; b < batches; ++b) {
    MPI_Barrier(comm);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) call();
    const std::chrono::duration<double, std::micro> elapsed =
        std::chrono::steady_clock::now() - start;
    per_call.push_back(elapsed.count() / iters);
  }
  std::sort(per_call.begin(), per_call.end());
  double median = per_call[per_call.size() / 2];
  MPI_Allreduce(MPI_IN_PLACE, &median, 1, MPI_DOUBLE, MPI_MAX, comm);
  return median;
}

}  // namespace peerplan::tune
