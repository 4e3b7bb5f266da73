// SPDX-License-Identifier: Apache-2.0
// From measured times to route cutoffs (where each P2P route beats the
// others), to protocol windows (where each CUDA push protocol beats the
// others) and to launch shapes (the one-shot grid that is fastest at each
// message size). Pure functions of the medians, so that every rank (which holds
// the same, agreed medians) derives the same values, and so that the rules
// are tested without timing anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "peerplan/config.hpp"
#include "routing/launch_shape_tuning.hpp"
#include "routing/protocol_tuning.hpp"

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
//    smallest; kAutoCutoff (auto, the default applies) when no fused size
//    was measured (-e below one row of --hidden).
// Between two measured sizes a route is admitted only up to the last size
// where it was seen to win: the cutoffs never claim an unmeasured win.
RouteCutoffs derive_cutoffs(std::span<const AllReduceTimes> all_reduce,
                            std::span<const FusedTimes> fused);

// Median time per call (µs) of one push one-shot all-reduce size, forced
// onto each protocol.
struct OneShotProtocolTimes {
  std::size_t bytes = 0;
  double ll_us = 0;
  double lamport_us = 0;
};

// Median time per call (µs) of one fused add + RMSNorm size, forced onto
// each of its P2P protocols (two-shot: the fused_two_shot route).
struct FusedProtocolTimes {
  std::size_t bytes = 0;
  std::int64_t rows = 0;  // of the --hidden elements each
  double ll_us = 0;
  double lamport_us = 0;
  double two_shot_us = 0;
};

// Median time per call (µs) of one push two-shot all-reduce size (a
// contiguous layout), forced onto each protocol. lamport_us comes last and
// defaults to never the fastest, so that a row of {bytes, staged, dma}
// keeps the meaning it had before Lamport was timed (rather than a 0 µs
// Lamport winning it).
struct TwoShotProtocolTimes {
  std::size_t bytes = 0;
  double staged_us = 0;
  double dma_us = 0;
  double lamport_us = std::numeric_limits<double>::infinity();
};

// ll, lamport, two_shot: the one-shot and fused protocols; staged, lamport,
// dma: the two-shot's.
enum class ProtocolWinner { ll, lamport, two_shot, staged, dma };
const char* to_string(ProtocolWinner winner) noexcept;

// The fastest protocol at one size. LL lines move twice the bytes over the
// links for the same data, so LL must be strictly faster: a tie goes to
// Lamport (one-shot), or to two-shot, then Lamport (fused; two-shot is
// what the fused op runs past every window anyway).
// The two-shot's Lamport and copy engines must be strictly faster than
// the staged kernel, the default, to win; a tie between them goes to
// Lamport (its window comes first in the router).
ProtocolWinner fastest_protocol(const OneShotProtocolTimes& times) noexcept;
ProtocolWinner fastest_protocol(const FusedProtocolTimes& times) noexcept;
ProtocolWinner fastest_protocol(const TwoShotProtocolTimes& times) noexcept;

// The protocol windows the measurements support (rows in increasing size),
// for the router's order: a fused message in fused_lamport runs Lamport,
// else LL lines in fused_ll, else the two-shot.
//  - one_shot_lamport: above the largest measured size s such that LL is
//    the fastest at every measured size <= s; every size when Lamport
//    wins the smallest size.
//  - fused_lamport: the longest contiguous run of measured sizes at which
//    Lamport is the fastest of the three (the lowest run on a tie): up to
//    its largest size, above the measured size just below it (0 when the
//    run starts at the smallest size). Never when Lamport never wins.
//  - fused_ll: outside that window only LL and the two-shot can run, so it
//    is up to the largest measured size s such that, at every measured
//    size <= s outside the window, LL is strictly faster than the two-shot
//    (inside the window Lamport runs whatever LL does there); never when
//    the two-shot is faster at the smallest size outside the window, or
//    when every measured size is inside it.
//  - two_shot_lamport: up to the largest measured size s such that
//    Lamport is the fastest of the three two-shot protocols at every
//    measured size <= s; never when it does not win the smallest size.
//  - two_shot_dma: above the largest measured size at which dma was not
//    the fastest (staged or Lamport won; dma won every measured size above
//    it); every size when dma won every size. When dma won none, or lost
//    the largest, that is above the largest measured size: nothing
//    claimed for dma.
// Applied in the router's order, every measured size then gets its winner,
// except where the winners alternate more than these windows can say: a
// Lamport win outside the longest run gets LL or the two-shot, whichever
// was faster there; an LL win above a size (outside the window) where the
// two-shot was faster gets the two-shot; a two-shot Lamport win above a
// size Lamport lost gets the staged kernel (Lamport's window ended below
// it, and dma's starts above it); a dma win below a size dma lost gets
// Lamport (inside its window) or the staged kernel. Like derive_cutoffs, a
// protocol is admitted only up to the last size where it was seen to win.
// An empty span leaves its windows auto (nullopt): the transport's
// built-in windows stay (e.g. pull mode, which has no one-shot or two-shot
// protocols).
routing::ProtocolTuning derive_protocols(std::span<const OneShotProtocolTimes> one_shot,
                                         std::span<const FusedProtocolTimes> fused,
                                         std::span<const TwoShotProtocolTimes> two_shot = {});

// Median time per call (µs) of one one-shot all-reduce size (on the
// protocol the router gives it) with its grid capped at each candidate
// (KernelChoices::one_shot_max_blocks), in the order of the candidates.
struct OneShotGridTimes {
  std::size_t bytes = 0;
  std::vector<double> us_by_candidate;
};

// The grid caps the sweep times on a GPU of `multiprocessors` SMs:
// multiprocessors / 8, / 4, / 2 and multiprocessors (the transport's
// default, one block per SM), each at least 1, without repeats, in
// increasing order. Empty when `multiprocessors` < 1.
std::vector<int> one_shot_grid_candidates(int multiprocessors);

// The fastest candidate's blocks at one size. A tie goes to the largest
// grid: the default (the largest candidate) must be beaten to be replaced,
// and a larger grid is the safer guess for the sizes between those measured.
// Throws std::invalid_argument when the row's times do not match the
// candidates one to one.
int fastest_grid(const OneShotGridTimes& times, std::span<const int> candidates);

// The one-shot grid steps the measurements support (rows in increasing
// size; the largest candidate is the transport's default):
//  - each measured size's winner is fastest_grid;
//  - consecutive sizes with the same winner form one step, whose
//    max_bytes is the largest size of the run (a message between two
//    measured sizes takes the larger one's step);
//  - trailing steps whose winner is the default are dropped: past the last
//    step the transport's default applies anyway. So when the default wins
//    every size (or nothing was measured) there are no steps.
// routing::one_shot_grid_for then gives every measured size its winner.
routing::LaunchShapeTuning derive_launch_shapes(std::span<const OneShotGridTimes> rows,
                                                std::span<const int> candidates);

}  // namespace peerplan::tune
