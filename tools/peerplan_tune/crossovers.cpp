// SPDX-License-Identifier: Apache-2.0
#include "crossovers.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace peerplan::tune {
namespace {

struct Run {
  std::size_t first = 0;
  std::size_t length = 0;
};

Winner winner_of(const AllReduceTimes& row) noexcept { return fastest(row); }
ProtocolWinner winner_of(const FusedProtocolTimes& row) noexcept { return fastest_protocol(row); }

// The longest run of rows [from, end) at which `winner` is the fastest
// (the lowest of equally long runs).
template <typename Row, typename Outcome>
Run longest_run(std::span<const Row> rows, std::size_t from, Outcome winner) {
  Run best, current;
  for (std::size_t i = from; i < rows.size(); ++i) {
    if (winner_of(rows[i]) != winner) {
      current.length = 0;
      continue;
    }
    if (current.length == 0) current.first = i;
    if (++current.length > best.length) best = current;
  }
  return best;
}

bool inside(const Run& run, std::size_t index) noexcept {
  return index >= run.first && index < run.first + run.length;
}

// The largest measured size up to which `winner` was the fastest at
// every measured size (the router runs it below everything else): 0 when
// it lost the smallest size, auto without rows.
template <typename Row>
std::size_t winning_prefix_max(std::span<const Row> rows, ProtocolWinner winner) {
  if (rows.empty()) return kAutoCutoff;
  std::size_t prefix_max = 0;
  for (const Row& row : rows) {
    if (fastest_protocol(row) != winner) break;
    prefix_max = row.bytes;
  }
  return prefix_max;
}

// The LL prefix of the rows outside the Lamport window: there the router
// chooses between LL and the two-shot only.
std::size_t fused_ll_max(std::span<const FusedProtocolTimes> rows, const Run& lamport) {
  std::size_t ll_max = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (inside(lamport, i)) continue;
    if (!(rows[i].ll_us < rows[i].two_shot_us)) break;
    ll_max = rows[i].bytes;
  }
  return ll_max;
}

// The last size dma did not win (staged or Lamport did): copy engines above it.
std::size_t two_shot_dma_after(std::span<const TwoShotProtocolTimes> rows) {
  if (rows.empty()) return kAutoCutoff;
  std::size_t after = 0;  // dma at every size, unless another protocol won one
  for (const TwoShotProtocolTimes& row : rows)
    if (fastest_protocol(row) != ProtocolWinner::dma) after = row.bytes;
  return after;
}

}  // namespace

const char* to_string(Winner winner) noexcept {
  switch (winner) {
    case Winner::one_shot:
      return "one-shot";
    case Winner::two_shot:
      return "two-shot";
    case Winner::fallback:
      return "fallback";
  }
  return "?";
}

const char* to_string(ProtocolWinner winner) noexcept {
  switch (winner) {
    case ProtocolWinner::ll:
      return "LL";
    case ProtocolWinner::lamport:
      return "Lamport";
    case ProtocolWinner::two_shot:
      return "two-shot";
    case ProtocolWinner::staged:
      return "staged";
    case ProtocolWinner::dma:
      return "dma";
  }
  return "?";
}

Winner fastest(const AllReduceTimes& t) noexcept {
  if (t.one_shot_us < t.fallback_us && t.one_shot_us <= t.two_shot_us) return Winner::one_shot;
  if (t.two_shot_us < t.fallback_us && t.two_shot_us < t.one_shot_us) return Winner::two_shot;
  return Winner::fallback;
}

RouteCutoffs derive_cutoffs(std::span<const AllReduceTimes> all_reduce,
                            std::span<const FusedTimes> fused) {
  RouteCutoffs cutoffs{0, 0, 0, 0};
  std::size_t above_one_shot = 0;  // first row past the one-shot region
  while (above_one_shot < all_reduce.size() &&
         fastest(all_reduce[above_one_shot]) == Winner::one_shot) {
    cutoffs.one_shot_max_bytes = all_reduce[above_one_shot].bytes;
    ++above_one_shot;
  }
  const Run run = longest_run(all_reduce, above_one_shot, Winner::two_shot);
  if (run.length > 0) {
    cutoffs.two_shot_max_bytes = all_reduce[run.first + run.length - 1].bytes;
    cutoffs.two_shot_min_bytes = run.first == above_one_shot ? 0 : all_reduce[run.first].bytes;
  }
  // No fused row (-e below one row of --hidden): nothing measured, so the
  // entry must not turn the fused route off; auto keeps the default.
  if (fused.empty()) cutoffs.fused_max_bytes = kAutoCutoff;
  for (const FusedTimes& row : fused) {
    if (!(row.p2p_us < row.fallback_us)) break;
    cutoffs.fused_max_bytes = row.bytes;
  }
  return cutoffs;
}

ProtocolWinner fastest_protocol(const OneShotProtocolTimes& t) noexcept {
  return t.ll_us < t.lamport_us ? ProtocolWinner::ll : ProtocolWinner::lamport;
}

ProtocolWinner fastest_protocol(const FusedProtocolTimes& t) noexcept {
  if (t.ll_us < t.lamport_us && t.ll_us < t.two_shot_us) return ProtocolWinner::ll;
  if (t.lamport_us < t.two_shot_us) return ProtocolWinner::lamport;
  return ProtocolWinner::two_shot;
}

ProtocolWinner fastest_protocol(const TwoShotProtocolTimes& t) noexcept {
  if (t.lamport_us < t.staged_us && t.lamport_us <= t.dma_us) return ProtocolWinner::lamport;
  if (t.dma_us < t.staged_us && t.dma_us < t.lamport_us) return ProtocolWinner::dma;
  return ProtocolWinner::staged;
}

routing::ProtocolTuning derive_protocols(std::span<const OneShotProtocolTimes> one_shot,
                                         std::span<const FusedProtocolTimes> fused,
                                         std::span<const TwoShotProtocolTimes> two_shot) {
  // Up to a measured size; 0 (the protocol lost the smallest size): never.
  const auto up_to = [](std::size_t bytes) {
    return bytes == 0 ? Window::never() : Window::up_to_bytes(bytes);
  };
  routing::ProtocolTuning tuning;  // every window auto
  if (!one_shot.empty())
    tuning.one_shot_lamport = Window::above_bytes(winning_prefix_max(one_shot, ProtocolWinner::ll));
  if (!two_shot.empty()) {
    tuning.two_shot_dma = Window::above_bytes(two_shot_dma_after(two_shot));
    tuning.two_shot_lamport = up_to(winning_prefix_max(two_shot, ProtocolWinner::lamport));
  }
  if (fused.empty()) return tuning;
  const Run lamport = longest_run(fused, 0, ProtocolWinner::lamport);
  if (lamport.length == 0) {
    tuning.fused_lamport = Window::never();
  } else {
    tuning.fused_lamport = Window{lamport.first == 0 ? 0 : fused[lamport.first - 1].bytes,
                                  fused[lamport.first + lamport.length - 1].bytes};
  }
  tuning.fused_ll = up_to(fused_ll_max(fused, lamport));
  return tuning;
}

std::vector<int> one_shot_grid_candidates(int multiprocessors) {
  std::vector<int> candidates;
  if (multiprocessors < 1) return candidates;
  for (int divisor : {8, 4, 2, 1}) {
    const int blocks = std::max(1, multiprocessors / divisor);
    if (candidates.empty() || candidates.back() != blocks) candidates.push_back(blocks);
  }
  return candidates;
}

int fastest_grid(const OneShotGridTimes& times, std::span<const int> candidates) {
  if (candidates.empty() || times.us_by_candidate.size() != candidates.size()) {
    throw std::invalid_argument("the " + std::to_string(times.bytes) +
                                "-byte one-shot grid row has " +
                                std::to_string(times.us_by_candidate.size()) + " times for " +
                                std::to_string(candidates.size()) + " candidate grids");
  }
  std::size_t best = 0;
  for (std::size_t i = 1; i < candidates.size(); ++i) {
    const double us = times.us_by_candidate[i], best_us = times.us_by_candidate[best];
    if (us < best_us || (us == best_us && candidates[i] > candidates[best])) best = i;
  }
  return candidates[best];
}

routing::LaunchShapeTuning derive_launch_shapes(std::span<const OneShotGridTimes> rows,
                                                std::span<const int> candidates) {
  routing::LaunchShapeTuning shapes;
  if (rows.empty()) return shapes;
  auto& steps = shapes.one_shot_grid;
  for (const OneShotGridTimes& row : rows) {
    const int winner = fastest_grid(row, candidates);
    if (!steps.empty() && steps.back().blocks == winner) {
      steps.back().max_bytes = row.bytes;  // the run goes on
    } else {
      steps.push_back({row.bytes, winner});
    }
  }
  const int default_blocks = *std::max_element(candidates.begin(), candidates.end());
  while (!steps.empty() && steps.back().blocks == default_blocks) steps.pop_back();
  return shapes;
}

}  // namespace peerplan::tune
