// The measurement itself: one communicator per route, each created with
// cutoffs that force every declared size onto that route (one-shot,
// two-shot, or P2P disabled for the fallback), the same sizes declared on
// each, and every size timed on every route.
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

namespace peerplan::tune {

struct SweepPlan {
  std::size_t min_bytes = 1024;  // all-reduce sizes: min_bytes, 2 x, 4 x, ... up to max_bytes
  std::size_t max_bytes = 1024;
  DataType dtype = DataType::bf16;
  std::int64_t hidden = 7168;  // fused op: rows of this many elements, as many as fit a size
  TimingPlan timing;
};

struct Sweep {
  Backend backend = Backend::host;
  int ranks = 0;
  std::string fingerprint;
  std::vector<AllReduceTimes> all_reduce;  // increasing sizes
  std::vector<FusedTimes> fused;           // increasing sizes
};

// Called on every rank after each measured row (rank 0 prints it).
struct RowListener {
  std::function<void(const Sweep&)> started;  // backend and fingerprint known
  std::function<void(const AllReduceTimes&)> all_reduce;
  std::function<void(const FusedTimes&)> fused;
};

// The all-reduce sizes of a plan: min_bytes doubled up to max_bytes.
std::vector<std::size_t> sweep_sizes(const SweepPlan& plan);

// Collective over `comm`. Throws std::runtime_error (or a peerplan::Error
// from create/declare) when P2P is not available or a call does not take
// the route its communicator forces.
Sweep measure_routes(MPI_Comm comm, const SweepPlan& plan, const RowListener& listener);

}  // namespace peerplan::tune
