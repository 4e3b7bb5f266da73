#include "crossovers.hpp"

namespace peerplan::tune {
namespace {

struct Run {
  std::size_t first = 0;
  std::size_t length = 0;
};

// The longest run of rows [from, end) at which two-shot is the fastest.
Run longest_two_shot_run(std::span<const AllReduceTimes> rows, std::size_t from) {
  Run best, current;
  for (std::size_t i = from; i < rows.size(); ++i) {
    if (fastest(rows[i]) != Winner::two_shot) {
      current.length = 0;
      continue;
    }
    if (current.length == 0) current.first = i;
    if (++current.length > best.length) best = current;
  }
  return best;
}

}  // namespace

const char* to_string(Winner winner) noexcept {
  switch (winner) {
    case Winner::one_shot: return "one-shot";
    case Winner::two_shot: return "two-shot";
    case Winner::fallback: return "fallback";
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
  const Run run = longest_two_shot_run(all_reduce, above_one_shot);
  if (run.length > 0) {
    cutoffs.two_shot_max_bytes = all_reduce[run.first + run.length - 1].bytes;
    cutoffs.two_shot_min_bytes = run.first == above_one_shot ? 0 : all_reduce[run.first].bytes;
  }
  for (const FusedTimes& row : fused) {
    if (!(row.p2p_us < row.fallback_us)) break;
    cutoffs.fused_max_bytes = row.bytes;
  }
  return cutoffs;
}

}  // namespace peerplan::tune
