// SPDX-License-Identifier: Apache-2.0
// Logging, controlled by PEERPLAN_DEBUG (NONE, WARN, INFO, TRACE),
// PEERPLAN_DEBUG_SUBSYS (which subsystems' INFO and TRACE lines show) and
// PEERPLAN_DEBUG_FILE (where the lines go). Lines go to stderr, or the file,
// prefixed with the short host name, the process id and, once known, the
// rank: "peerplan[node7:4711 rank 1] INFO: ..." (before a communicator sets
// the rank: "peerplan[node7:4711] WARN: ...").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/log_subsystems.hpp"
#include "peerplan/config.hpp"

namespace peerplan::log {

// Process-wide level; set from Config when a communicator is created.
void set_level(LogLevel level) noexcept;
LogLevel level() noexcept;
inline bool enabled(LogLevel at) noexcept { return at != LogLevel::none && at <= level(); }
// Process-wide mask of Subsystem bits whose INFO and TRACE lines show
// (every subsystem until set).
void set_subsystems(std::uint32_t mask) noexcept;
std::uint32_t subsystems() noexcept;
inline bool enabled(LogLevel at, Subsystem subsystem) noexcept {
  return enabled(at) && (subsystems() & static_cast<std::uint32_t>(subsystem)) != 0;
}
// Rank shown in the prefix (-1 = unknown, prefix omitted).
void set_rank(int rank) noexcept;

// Sends the lines to the file `pattern` names (expand_file_name), opened
// for appending, or to stderr when it is empty. A file that cannot be
// opened leaves the lines on stderr, with one WARN there per pattern: a
// log never fails the job. Setting the pattern in force again does nothing.
void set_file(std::string_view pattern);
// `pattern` with %h replaced by the short host name, %p by the process id
// and %% by one '%' (NCCL_DEBUG_FILE's convention); any other '%' stays.
std::string expand_file_name(std::string_view pattern);

void write(LogLevel at, std::string_view message);
// WARN lines are shown whatever the subsystems.
inline void warn(std::string_view m) {
  if (enabled(LogLevel::warn)) write(LogLevel::warn, m);
}
inline void info(Subsystem s, std::string_view m) {
  if (enabled(LogLevel::info, s)) write(LogLevel::info, m);
}
inline void trace(Subsystem s, std::string_view m) {
  if (enabled(LogLevel::trace, s)) write(LogLevel::trace, m);
}

}  // namespace peerplan::log
