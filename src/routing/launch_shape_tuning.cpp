// SPDX-License-Identifier: Apache-2.0
#include "routing/launch_shape_tuning.hpp"

#include "core/value_parsing.hpp"
#include "peerplan/config.hpp"

namespace peerplan::routing {

std::optional<int> tuned_one_shot_grid(const LaunchShapeTuning& shapes,
                                       std::size_t bytes) noexcept {
  for (const GridStep& step : shapes.one_shot_grid)
    if (bytes <= step.max_bytes) return step.blocks;
  return std::nullopt;
}

int one_shot_grid_for(int configured_blocks, const LaunchShapeTuning& shapes, std::size_t bytes,
                      int default_blocks) noexcept {
  if (configured_blocks > 0) return configured_blocks;
  return tuned_one_shot_grid(shapes, bytes).value_or(default_blocks);
}

std::string describe_one_shot_grid(const std::vector<GridStep>& steps) {
  std::string text;
  for (const GridStep& step : steps) {
    if (!text.empty()) text += ' ';
    text += std::to_string(step.max_bytes) + ':' + std::to_string(step.blocks);
  }
  return text;
}

std::optional<std::vector<GridStep>> parse_one_shot_grid(std::string_view text,
                                                         std::string& error) {
  std::vector<GridStep> steps;
  while (!text.empty()) {
    const std::size_t blank = text.find(' ');
    const std::string_view pair = text.substr(0, blank);
    text = blank == std::string_view::npos ? std::string_view{} : text.substr(blank + 1);
    if (pair.empty()) continue;  // several blanks between pairs
    const std::size_t colon = pair.find(':');
    const auto bytes =
        colon == std::string_view::npos ? std::nullopt : core::parse_size(pair.substr(0, colon));
    const auto blocks = colon == std::string_view::npos
                            ? std::nullopt
                            : core::parse_integer(pair.substr(colon + 1));
    if (!bytes || !blocks) {
      error = "\"" + std::string(pair) + "\" is not <size>:<blocks> (e.g. 1M:64)";
      return std::nullopt;
    }
    if (*blocks < 1 || *blocks > kOneShotMaxBlocksLimit) {
      error = "\"" + std::string(pair) + "\": blocks must be 1.." +
              std::to_string(kOneShotMaxBlocksLimit);
      return std::nullopt;
    }
    if (!steps.empty() && *bytes <= steps.back().max_bytes) {
      error = "\"" + std::string(pair) + "\": sizes must increase from step to step";
      return std::nullopt;
    }
    steps.push_back({*bytes, static_cast<int>(*blocks)});
  }
  return steps;
}

}  // namespace peerplan::routing
