// From measured times to route cutoffs: where each P2P route beats the
// others. A pure function of the medians, so that every rank (which holds
// the same, agreed medians) derives the same cutoffs, and so that the
// rules are tested without timing anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "peerplan/config.hpp"

namespace peerplan::tune {

// Median time per call (µs) of one all-reduce size on each route.
struct AllReduceTimes {
  std::size_t bytes = 0;
  double one_shot_us = 0;
  double two_shot_us = 0;
  double fallback_us = 0;
};

// Median time per call (µs) of one fused add + RMSNorm size.
struct FusedTimes {
  std::size_t bytes = 0;
  std::int64_t rows = 0;  // of the --hidden elements each
  double p2p_us = 0;
  double fallback_us = 0;
};

enum class Winner { one_shot, two_shot, fallback };
const char* to_string(Winner winner) noexcept;

// The strictly fastest route at one size; a tie goes to the fallback (a
// P2P route must beat what it replaces), then to one-shot.
Winner fastest(const AllReduceTimes& times) noexcept;

// The cutoffs the measurements support (rows in increasing size):
//  - one_shot_max_bytes: the largest measured size s such that one-shot is
//    the fastest of the three at every measured size <= s; 0 if it is not
//    even at the smallest.
//  - two-shot window: the longest contiguous run of measured sizes above
//    one_shot_max_bytes at which two-shot is the fastest (the lowest run
//    on a tie). two_shot_max_bytes is its largest size; two_shot_min_bytes
//    its smallest, or 0 when the run starts at the first size above the
//    one-shot region (no measured size between them was lost, so the
//    window reaches down to one-shot's). Both 0 when two-shot never wins.
//  - fused_max_bytes: the largest measured size s such that the fused P2P
//    route beats its fallback at every measured size <= s; 0 if not at the
//    smallest (or nothing was measured).
// Between two measured sizes a route is admitted only up to the last size
// where it was seen to win: the cutoffs never claim an unmeasured win.
RouteCutoffs derive_cutoffs(std::span<const AllReduceTimes> all_reduce,
                            std::span<const FusedTimes> fused);

}  // namespace peerplan::tune
