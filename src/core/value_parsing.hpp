// SPDX-License-Identifier: Apache-2.0
// Strict parsers for environment values: the whole string must be one
// valid value (no surrounding spaces, no trailing garbage, no overflow),
// because a half-parsed "5000ms" or "1.5M" silently meaning something else
// is worse than an error.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace peerplan::core {

bool equals_ignore_case(std::string_view a, std::string_view b) noexcept;

// Decimal integer with an optional leading '-'.
std::optional<std::int64_t> parse_integer(std::string_view text) noexcept;

// Byte count: decimal digits, optionally followed by one of K, M, G
// (case-insensitive; KiB, MiB, GiB multiples). "512K" = 524288.
std::optional<std::size_t> parse_size(std::string_view text) noexcept;

// 1/0, true/false, yes/no, on/off (case-insensitive).
std::optional<bool> parse_bool(std::string_view text) noexcept;

// Matches `text` case-insensitively against to_string(value) of each value.
template <typename Enum, std::size_t N>
std::optional<Enum> parse_enum(std::string_view text, const std::array<Enum, N>& values) noexcept {
  for (Enum value : values)
    if (equals_ignore_case(text, to_string(value))) return value;
  return std::nullopt;
}

// "A|B|C" from to_string of each value, for error messages.
template <typename Enum, std::size_t N>
std::string enum_names(const std::array<Enum, N>& values) {
  std::string names;
  for (Enum value : values) {
    if (!names.empty()) names += '|';
    names += to_string(value);
  }
  return names;
}

}  // namespace peerplan::core
