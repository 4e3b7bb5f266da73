// SPDX-License-Identifier: Apache-2.0
#include "core/value_parsing.hpp"

#include <charconv>
#include <limits>
#include <system_error>

namespace peerplan::core {
namespace {

char lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

}  // namespace

bool equals_ignore_case(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

std::optional<std::int64_t> parse_integer(std::string_view text) noexcept {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  // from_chars takes no '+' and no spaces, and reports overflow: exactly
  // the strictness wanted, provided it consumed every character.
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end) return std::nullopt;
  return value;
}

std::optional<std::size_t> parse_size(std::string_view text) noexcept {
  std::size_t multiplier = 1;
  if (!text.empty()) {
    switch (lower(text.back())) {
      case 'k':
        multiplier = std::size_t{1} << 10;
        break;
      case 'm':
        multiplier = std::size_t{1} << 20;
        break;
      case 'g':
        multiplier = std::size_t{1} << 30;
        break;
      default:
        break;
    }
    if (multiplier != 1) text.remove_suffix(1);
  }
  // Unsigned from_chars rejects a '-' sign, so "-1" cannot wrap around.
  std::size_t count = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, count);
  if (text.empty() || ec != std::errc{} || ptr != end) return std::nullopt;
  if (count > std::numeric_limits<std::size_t>::max() / multiplier) return std::nullopt;
  return count * multiplier;
}

std::optional<bool> parse_bool(std::string_view text) noexcept {
  for (std::string_view yes : {"1", "true", "yes", "on"})
    if (equals_ignore_case(text, yes)) return true;
  for (std::string_view no : {"0", "false", "no", "off"})
    if (equals_ignore_case(text, no)) return false;
  return std::nullopt;
}

}  // namespace peerplan::core
