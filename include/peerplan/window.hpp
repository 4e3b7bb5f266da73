// SPDX-License-Identifier: Apache-2.0
// The message sizes a protocol of the CUDA push kernels takes
// (KernelChoices, the tuning file, the INFO log all use this one type).
#pragma once

#include <cstddef>
#include <limits>

namespace peerplan {

// No upper bound: a window or a byte limit that never ends.
inline constexpr std::size_t kNoLimit = std::numeric_limits<std::size_t>::max();

// Messages of `above` < bytes <= `up_to` take the protocol. A window with
// above >= up_to holds no size; never() is its one spelling that create()
// and the parsers accept.
struct Window {
  std::size_t above = 0;
  std::size_t up_to = kNoLimit;

  static constexpr Window never() noexcept { return {0, 0}; }
  static constexpr Window every_size() noexcept { return {0, kNoLimit}; }
  // Every message up to `bytes`.
  static constexpr Window up_to_bytes(std::size_t bytes) noexcept { return {0, bytes}; }
  // Every message above `bytes`, with no ceiling.
  static constexpr Window above_bytes(std::size_t bytes) noexcept { return {bytes, kNoLimit}; }

  constexpr bool is_never() const noexcept { return above >= up_to; }
  constexpr bool contains(std::size_t bytes) const noexcept {
    return bytes > above && bytes <= up_to;
  }
  // A window other than never() that holds no size is a mistake (a range
  // written backwards), not a way of saying "never".
  constexpr bool is_valid() const noexcept { return !is_never() || *this == never(); }

  friend constexpr bool operator==(const Window&, const Window&) = default;
};

}  // namespace peerplan
