// SPDX-License-Identifier: Apache-2.0
#include "core/window_text.hpp"

#include <utility>

#include "core/value_parsing.hpp"

namespace peerplan::core {
namespace {

constexpr std::string_view kRangeMark = "..";

std::string bad_size(std::string_view text) {
  std::string problem = "'";
  problem.append(text);
  problem += "' is not a byte count";
  return problem;
}

}  // namespace

WindowSetting parse_window(std::string_view text) {
  if (equals_ignore_case(text, "auto")) return {};
  if (equals_ignore_case(text, "never") || equals_ignore_case(text, "off"))
    return {Window::never(), {}};
  if (equals_ignore_case(text, "all")) return {Window::every_size(), {}};
  const std::size_t mark = text.find(kRangeMark);
  if (mark == std::string_view::npos) {
    const auto up_to = parse_size(text);
    if (!up_to) return {std::nullopt, bad_size(text)};
    if (*up_to == 0) return {std::nullopt, "a window up to 0 bytes holds no message: write never"};
    return {Window::up_to_bytes(*up_to), {}};
  }
  const std::string_view above_text = text.substr(0, mark);
  const std::string_view up_to_text = text.substr(mark + kRangeMark.size());
  const auto above = parse_size(above_text);
  if (!above) return {std::nullopt, bad_size(above_text)};
  if (up_to_text.empty()) {
    if (*above == kNoLimit) {
      return {std::nullopt, "the range '" + std::string(text) +
                                "' holds no message (no size is above its start): write never"};
    }
    return {Window::above_bytes(*above), {}};
  }
  const auto up_to = parse_size(up_to_text);
  if (!up_to) return {std::nullopt, bad_size(up_to_text)};
  if (*above >= *up_to) {
    return {std::nullopt, "the range '" + std::string(text) +
                              "' holds no message (its start must be below its end): write "
                              "never, or the range the other way round"};
  }
  return {Window{*above, *up_to}, {}};
}

std::string size_text(std::size_t bytes) {
  constexpr std::pair<std::size_t, char> kUnits[] = {
      {std::size_t{1} << 30, 'G'}, {std::size_t{1} << 20, 'M'}, {std::size_t{1} << 10, 'K'}};
  for (const auto& [unit, suffix] : kUnits) {
    if (bytes != 0 && bytes % unit == 0) return std::to_string(bytes / unit) + suffix;
  }
  return std::to_string(bytes);
}

std::string window_text(const Window& window) {
  if (window.is_never()) return "never";
  if (window == Window::every_size()) return "all";
  if (window.above == 0) return size_text(window.up_to);
  std::string text = size_text(window.above) + std::string(kRangeMark);
  if (window.up_to != kNoLimit) text += size_text(window.up_to);
  return text;
}

std::string window_text(const std::optional<Window>& window) {
  return window ? window_text(*window) : std::string("auto");
}

}  // namespace peerplan::core
