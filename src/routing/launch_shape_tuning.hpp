// SPDX-License-Identifier: Apache-2.0
// Launch shapes measured on one machine (peerplan_tune), carried by its
// tuning file entry next to the cutoffs and the protocol windows. Unlike
// those, a launch shape is a local choice: it only applies to kernels
// without per-block flags (the one-shot on LL lines or Lamport, whose grid
// the tool sweeps), whose grid no peer depends on, so ranks could differ
// without harm (they do not: the file's entry is agreed like the rest).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace peerplan::routing {

// Messages up to `max_bytes` (and above the previous step's) launch at
// most `blocks` blocks.
struct GridStep {
  std::size_t max_bytes = 0;
  int blocks = 0;

  friend bool operator==(const GridStep&, const GridStep&) = default;
};

struct LaunchShapeTuning {
  // The one-shot's largest grid by message size, in increasing
  // max_bytes; blocks in 1..kOneShotMaxBlocksLimit. A message past the last
  // step (or with no steps) keeps the transport's default.
  std::vector<GridStep> one_shot_grid;

  friend bool operator==(const LaunchShapeTuning&, const LaunchShapeTuning&) = default;
};

// The step's blocks for a message of `bytes`; nullopt past the last step.
std::optional<int> tuned_one_shot_grid(const LaunchShapeTuning& shapes, std::size_t bytes) noexcept;

// The largest grid of a one-shot kernel launched for a message of `bytes`:
// the config's explicit choice (KernelChoices::one_shot_max_blocks, > 0)
// wins, then the tuned step, then `default_blocks` (the transport's: one
// block per multiprocessor).
int one_shot_grid_for(int configured_blocks, const LaunchShapeTuning& shapes, std::size_t bytes,
                      int default_blocks) noexcept;

// "65536:8 1048576:64 4194304:132", "" for no steps: the tuning file's
// value (bytes in decimal).
std::string describe_one_shot_grid(const std::vector<GridStep>& steps);

// Parses describe_one_shot_grid's form: space-separated "<size>:<blocks>"
// pairs, sizes with an optional K/M/G suffix, strictly increasing, blocks
// in 1..kOneShotMaxBlocksLimit; nullopt with `error` saying what is wrong.
std::optional<std::vector<GridStep>> parse_one_shot_grid(std::string_view text, std::string& error);

}  // namespace peerplan::routing
