// SPDX-License-Identifier: Apache-2.0
// The subsystems of INFO and TRACE lines, which PEERPLAN_DEBUG_SUBSYS
// filters (like NCCL_DEBUG_SUBSYS): a comma list of names, or "^" and a
// list for every subsystem but those. WARN lines are never filtered.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace peerplan::log {

// One bit each, so that a set of them is a mask.
enum class Subsystem : std::uint32_t {
  init = 1U << 0,       // create: environment, configuration, backend and locality
  bootstrap = 1U << 1,  // MPI bootstrap: ranks, local ranks, the duplicated communicator
  plan = 1U << 2,       // declare: the plan table
  route = 1U << 3,      // cutoffs, tuning file, protocol windows, P2P level between GPUs
  transport = 1U << 4,  // the P2P transports: kernels chosen, shared-memory segments
  fallback = 1U << 5,   // the NCCL and MPI fallbacks
  call = 1U << 6,       // each call's route and protocol (TRACE)
};

inline constexpr std::uint32_t kAllSubsystems = (1U << 7) - 1;

// "INIT", "BOOTSTRAP", ...
const char* to_string(Subsystem subsystem) noexcept;

// The names accepted, for error messages: "INIT, BOOTSTRAP, ..., CALL or ALL".
std::string subsystem_names();

// The mask a PEERPLAN_DEBUG_SUBSYS value selects: names separated by
// commas, case-insensitive, spaces around them ignored; ALL is every
// subsystem; a leading '^' inverts the whole list ("^CALL": all but CALL).
// The empty string is ALL. nullopt when a name is unknown or empty.
std::optional<std::uint32_t> parse_subsystems(std::string_view text);

}  // namespace peerplan::log
