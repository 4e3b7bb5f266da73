// SPDX-License-Identifier: Apache-2.0
#include "core/log_subsystems.hpp"

#include <array>

#include "core/value_parsing.hpp"

namespace peerplan::log {
namespace {

constexpr std::array kSubsystems{Subsystem::init,  Subsystem::bootstrap, Subsystem::plan,
                                 Subsystem::route, Subsystem::transport, Subsystem::fallback,
                                 Subsystem::call};

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::optional<std::uint32_t> mask_of(std::string_view name) {
  if (core::equals_ignore_case(name, "ALL")) return kAllSubsystems;
  for (const Subsystem subsystem : kSubsystems)
    if (core::equals_ignore_case(name, to_string(subsystem)))
      return static_cast<std::uint32_t>(subsystem);
  return std::nullopt;
}

}  // namespace

const char* to_string(Subsystem subsystem) noexcept {
  switch (subsystem) {
    case Subsystem::init:
      return "INIT";
    case Subsystem::bootstrap:
      return "BOOTSTRAP";
    case Subsystem::plan:
      return "PLAN";
    case Subsystem::route:
      return "ROUTE";
    case Subsystem::transport:
      return "TRANSPORT";
    case Subsystem::fallback:
      return "FALLBACK";
    case Subsystem::call:
      return "CALL";
  }
  return "?";
}

std::string subsystem_names() {
  std::string names;
  for (const Subsystem subsystem : kSubsystems) {
    names += to_string(subsystem);
    names += ", ";
  }
  names.resize(names.size() - 2);
  return names + " or ALL";
}

std::optional<std::uint32_t> parse_subsystems(std::string_view text) {
  text = trimmed(text);
  if (text.empty()) return kAllSubsystems;
  const bool inverted = text.front() == '^';
  if (inverted) text.remove_prefix(1);
  std::uint32_t mask = 0;
  while (true) {
    const std::size_t comma = text.find(',');
    const auto name = trimmed(text.substr(0, comma));
    const auto bits = mask_of(name);
    if (!bits) return std::nullopt;
    mask |= *bits;
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return inverted ? kAllSubsystems & ~mask : mask;
}

}  // namespace peerplan::log
