// SPDX-License-Identifier: Apache-2.0
// The one-GPU kernel loop's (kernel_loop.cu) decisions that need no GPU:
// which cases its command line names, which sizes, how many virtual ranks,
// and how large a grid each virtual rank may launch so that every virtual
// rank's blocks are resident at once. Pure C++ (no CUDA), so that a CPU-only
// build tests it (tests/benchmarks/).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace peerplan::bench::loop {

// The P2P kernels the transport launches, as the loop names them.
enum class LoopCase {
  one_shot_ll,
  one_shot_lamport,
  two_shot,
  two_shot_lamport,
  two_shot_dma,
  pull_one_shot,         // registered input, read in place by the peers
  pull_two_shot,         // registered input, read in place by the peers
  pull_one_shot_staged,  // the input copied into the own slot first
  pull_two_shot_staged,
  fused_ll,
  fused_lamport,
  fused_staged,
  fused_two_shot_row_norm,  // the two-shot, then the row kernel
  fused_two_shot_rows,      // the same in one kernel (the transport's, where the rows fit)
};

struct LoopCaseInfo {
  LoopCase id;
  std::string_view name;  // as on the command line and in the table
  bool fused;             // sizes are rows of `hidden`, not bytes
};

// Every case, in table order.
const std::vector<LoopCaseInfo>& all_cases();

// "all", or a comma-separated list of case names (all_cases()); throws
// std::invalid_argument naming the unknown entry and the known names.
std::vector<LoopCaseInfo> parse_cases(std::string_view text);

// A comma-separated list of positive sizes, each a number with an optional
// K, M or G suffix (powers of 1024): "1K,4K,16M". Throws
// std::invalid_argument for an empty list, a zero, a bad suffix or text
// that is no number.
std::vector<std::int64_t> parse_sizes(std::string_view text);

// A comma-separated list of virtual rank counts, each 2..8 (the kernels'
// kMaxRanks); throws std::invalid_argument otherwise.
// Whether the case's kernels wait for their peers through the flag rows
// alone (the staged protocol), so that --iterations solo can raise those
// flags beforehand and run each virtual rank's kernel through on its own.
// The LL and Lamport kernels wait on their peers' data lines, the pull
// kernels read where their peers published their inputs, and the
// copy-engine two-shot's copies wait on events: none of that can be set up
// by hand.
bool waits_on_flags_only(LoopCase c) noexcept;

std::vector<int> parse_rank_counts(std::string_view text);

// Sizes from `first` to `last` (inclusive), multiplying by `factor`.
std::vector<std::int64_t> geometric_sizes(std::int64_t first, std::int64_t last,
                                          std::int64_t factor);

// The grid each virtual rank may launch, in launch units (blocks, or
// clusters for a clustered kernel): `device_units` is how many units of
// the kernel the whole device holds at once (occupancy per SM x SMs, or
// the occupancy calculator's clusters); `ranks` virtual ranks each keep
// `in_flight` kernels of that size resident (2 under programmatic
// dependent launch: the running one and its early-scheduled successor).
// 0 when not even one unit per virtual rank fits: the case cannot run
// without deadlocking its waits. Throws std::invalid_argument for ranks or
// in_flight < 1.
int resident_units_per_rank(int device_units, int ranks, int in_flight);

// The grid to launch: the recipe's `blocks` capped at `units_cap` units of
// `cluster` blocks (a whole number of clusters; at least one).
unsigned capped_blocks(unsigned blocks, int units_cap, unsigned cluster);

}  // namespace peerplan::bench::loop
