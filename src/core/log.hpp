// SPDX-License-Identifier: Apache-2.0
// Logging, controlled by PEERPLAN_DEBUG (NONE, WARN, INFO, TRACE). Lines go
// to stderr prefixed with the short host name, the process id and, once
// known, the rank: "peerplan[node7:4711 rank 1] INFO: ..." (before a
// communicator sets the rank: "peerplan[node7:4711] WARN: ...").
#pragma once

#include <string_view>

#include "peerplan/config.hpp"

namespace peerplan::log {

// Process-wide level; set from Config when a communicator is created.
void set_level(LogLevel level) noexcept;
LogLevel level() noexcept;
inline bool enabled(LogLevel at) noexcept { return at != LogLevel::none && at <= level(); }
// Rank shown in the prefix (-1 = unknown, prefix omitted).
void set_rank(int rank) noexcept;

void write(LogLevel at, std::string_view message);
inline void warn(std::string_view m) {
  if (enabled(LogLevel::warn)) write(LogLevel::warn, m);
}
inline void info(std::string_view m) {
  if (enabled(LogLevel::info)) write(LogLevel::info, m);
}
inline void trace(std::string_view m) {
  if (enabled(LogLevel::trace)) write(LogLevel::trace, m);
}

}  // namespace peerplan::log
