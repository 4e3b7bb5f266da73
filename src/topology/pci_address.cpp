// SPDX-License-Identifier: Apache-2.0
#include "topology/pci_address.hpp"

#include <cstdio>

namespace peerplan::topology {
namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses 1..max_digits hex digits that make up the whole of `field`.
std::optional<std::uint32_t> parse_hex_field(std::string_view field,
                                             std::size_t max_digits) noexcept {
  if (field.empty() || field.size() > max_digits) return std::nullopt;
  std::uint32_t value = 0;
  for (char c : field) {
    const int digit = hex_value(c);
    if (digit < 0) return std::nullopt;
    value = value * 16 + static_cast<std::uint32_t>(digit);
  }
  return value;
}

std::string_view trim(std::string_view text) noexcept {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

}  // namespace

std::string PciAddress::to_string() const {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%04x:%02x:%02x.%x", static_cast<unsigned>(domain),
                static_cast<unsigned>(bus), static_cast<unsigned>(device),
                static_cast<unsigned>(function));
  return buffer;
}

std::optional<PciAddress> PciAddress::parse(std::string_view text) noexcept {
  text = trim(text);
  const auto dot = text.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view function_field = text.substr(dot + 1);
  std::string_view rest = text.substr(0, dot);

  const auto last_colon = rest.rfind(':');
  if (last_colon == std::string_view::npos) return std::nullopt;
  const std::string_view device_field = rest.substr(last_colon + 1);
  rest = rest.substr(0, last_colon);

  std::string_view domain_field;
  std::string_view bus_field = rest;
  if (const auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    domain_field = rest.substr(0, colon);
    bus_field = rest.substr(colon + 1);
  }

  const auto function = parse_hex_field(function_field, 1);
  const auto device = parse_hex_field(device_field, 2);
  const auto bus = parse_hex_field(bus_field, 2);
  const auto domain = domain_field.empty() && rest.find(':') == std::string_view::npos
                          ? std::optional<std::uint32_t>(0)
                          : parse_hex_field(domain_field, 8);
  if (!function || !device || !bus || !domain) return std::nullopt;
  if (*function > 7 || *device > 31) return std::nullopt;
  return PciAddress{*domain, static_cast<std::uint8_t>(*bus), static_cast<std::uint8_t>(*device),
                    static_cast<std::uint8_t>(*function)};
}

}  // namespace peerplan::topology
