// SPDX-License-Identifier: Apache-2.0
// PCI addresses ("domain:bus:device.function") as the different tools print
// them: hwloc and lspci use a 4-digit domain ("0000:17:00.0"), CUDA's
// cudaDeviceGetPCIBusId and nvidia-smi an 8-digit one ("00000000:17:00.0"),
// in upper or lower case. Parsing to numbers makes all of them compare equal.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace peerplan::topology {

struct PciAddress {
  std::uint32_t domain = 0;
  std::uint8_t bus = 0;
  std::uint8_t device = 0;    // 0..31
  std::uint8_t function = 0;  // 0..7

  friend auto operator<=>(const PciAddress&, const PciAddress&) = default;

  // "dddd:bb:dd.f" in lower case (the domain widens past 4 digits only when
  // it needs to, e.g. Intel VMD domains "10000:e1:00.0").
  std::string to_string() const;

  // Accepts "[domain:]bus:device.function" with 1-8 hex digits of domain
  // (absent means 0), 1-2 of bus and device, 1 of function, either case,
  // surrounding whitespace ignored. Returns nullopt for anything else.
  static std::optional<PciAddress> parse(std::string_view text) noexcept;
};

}  // namespace peerplan::topology
