// SPDX-License-Identifier: Apache-2.0
// The measurement itself: one communicator per route, each created with
// cutoffs that force every declared size onto that route (one-shot,
// two-shot, or P2P disabled for the fallback), the same sizes declared on
// each, and every size timed on every route. Then, on the cuda backend,
// the same for the protocols of the push kernels: one communicator per
// protocol, its KernelChoices forcing that protocol at every size (the
// two-shot's staged kernel, copy engines and Lamport at every swept size).
// Last, the one-shot's grid: one communicator per candidate cap
// (KernelChoices::one_shot_max_blocks), the protocol left to the router.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "call_timer.hpp"
#include "crossovers.hpp"
#include "peerplan/dtype.hpp"
#include "peerplan/route.hpp"
#include "sweep_plan.hpp"

namespace peerplan::tune {

struct Sweep {
  Backend backend = Backend::host;
  int ranks = 0;
  std::string fingerprint;
  std::vector<AllReduceTimes> all_reduce;  // increasing sizes
  std::vector<FusedTimes> fused;           // increasing sizes
  // What the one-shot route ran (pull: the transport pulls, and the
  // one-shot has no protocols to tune).
  Protocol one_shot_protocol = Protocol::none;
  std::vector<OneShotProtocolTimes> one_shot_protocols;  // increasing sizes; may be empty
  std::vector<FusedProtocolTimes> fused_protocols;       // likewise
  std::vector<TwoShotProtocolTimes> two_shot_protocols;  // likewise
  // The one-shot grid sweep: the caps timed (one_shot_grid_candidates, the
  // last the transport's default) and a row per size; both may be empty.
  std::vector<int> grid_candidates;
  std::vector<OneShotGridTimes> one_shot_grid;
};

// Called on every rank after each measured row (rank 0 prints it).
struct RowListener {
  std::function<void(const Sweep&)> started;  // backend and fingerprint known
  std::function<void(const AllReduceTimes&)> all_reduce;
  std::function<void(const FusedTimes&)> fused;
  std::function<void(const OneShotProtocolTimes&)> one_shot_protocols;
  std::function<void(const FusedProtocolTimes&)> fused_protocols;
  std::function<void(const TwoShotProtocolTimes&)> two_shot_protocols;
  std::function<void(const std::vector<int>& candidates, const OneShotGridTimes&)> one_shot_grid;
  // Why a part of a sweep was left out (one line, same on every rank).
  std::function<void(const std::string&)> skipped;
};

// The all-reduce sizes of a plan: min_bytes doubled up to max_bytes.
std::vector<std::size_t> sweep_sizes(const SweepPlan& plan);

// Collective over `comm`. Throws std::runtime_error (or a peerplan::Error
// from create/declare) when P2P is not available or a call does not take
// the route its communicator forces.
Sweep measure_routes(MPI_Comm comm, const SweepPlan& plan, const RowListener& listener);

// The protocol sweep, after measure_routes (whose communicators are closed
// by then): fills sweep.one_shot_protocols (push mode only) and
// sweep.fused_protocols on the cuda backend, for the sizes up to
// plan.protocols_max_bytes, and sweep.two_shot_protocols (push mode only)
// for every size up to plan.max_bytes; nothing when protocols_max_bytes
// is 0, or on the host backend (one protocol).
// Collective over `comm`; throws std::runtime_error when a call does not
// run the route and protocol its communicator forces.
void measure_protocols(MPI_Comm comm, const SweepPlan& plan, Sweep& sweep,
                       const RowListener& listener);

// The one-shot grid sweep, after measure_protocols: on the cuda backend in
// push mode, for the all-reduce sizes up to plan.protocols_max_bytes, times
// the one-shot route (on the protocol the router gives each size) with its
// grid capped at each of one_shot_grid_candidates(the GPU's multiprocessor
// count, the smallest over `comm`), one communicator per cap; fills
// sweep.grid_candidates and sweep.one_shot_grid. Nothing (a `skipped`
// line) when protocols_max_bytes is 0, on the host backend, in pull mode
// (the pull one-shot's grid is not tuned) or when no size is that small.
// Collective over `comm`; throws std::runtime_error when a call does not
// run the one-shot route.
void measure_one_shot_grid(MPI_Comm comm, const SweepPlan& plan, Sweep& sweep,
                           const RowListener& listener);

}  // namespace peerplan::tune
