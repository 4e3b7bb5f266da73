// SPDX-License-Identifier: Apache-2.0
// Timing of collective calls on the host backend, whose calls return when
// their work is done: a steady clock around batches of calls, each batch
// started together (a barrier), the median batch, and the slowest rank's
// median on every rank, so that every rank derives the same cutoffs.
#pragma once

#include <mpi.h>

#include <functional>

namespace peerplan::tune {

// Median over `batches` of the mean time per call (µs) of `iters` calls,
// after `warmup` untimed calls. Collective over `comm`.
double time_host_calls(const std::function<void()>& call, int iters, int warmup, int batches,
                       MPI_Comm comm);

}  // namespace peerplan::tune
