// SPDX-License-Identifier: Apache-2.0
// The one text syntax of a protocol window (peerplan::Window), read from
// the PEERPLAN_* variables and the tuning file, written to the INFO log and
// the tuning file:
//
//   auto         no window set: the built-in default, or the tuning file's
//   never, off   no message size
//   all          every message size
//   N            up to N bytes (above 0)
//   A..B         above A bytes, up to B bytes (A < B)
//   A..          above A bytes, no ceiling
//
// Sizes are byte counts with an optional K, M or G suffix (KiB multiples:
// 64K = 65536); keywords are case-insensitive.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "peerplan/window.hpp"

namespace peerplan::core {

// What the syntax accepts, for error messages.
inline constexpr std::string_view kWindowSyntax =
    "auto, never (or off), all, a size N (up to N bytes), or a range A..B (above A, up to B "
    "bytes, A < B; A.. has no ceiling), sizes with an optional K, M or G suffix (e.g. 64K..4M)";

// The outcome of reading a window's text: `window` is nullopt for "auto".
// On bad text `problem` says what is wrong (the syntax is kWindowSyntax).
struct WindowSetting {
  std::optional<Window> window;
  std::string problem;  // empty when the text was valid

  bool ok() const noexcept { return problem.empty(); }
};

WindowSetting parse_window(std::string_view text);

// The text parse_window reads back: "never", "all", "64K", "64K..4M",
// "64K..", or "auto" for nullopt. Sizes that are whole KiB, MiB or GiB
// take their suffix.
std::string window_text(const Window& window);
std::string window_text(const std::optional<Window>& window);

// A size as parse_size reads it: "4M", "65536" -> "64K", "1000".
std::string size_text(std::size_t bytes);

}  // namespace peerplan::core
