// SPDX-License-Identifier: Apache-2.0
// Fault injection for the fault-tolerance tests (test-only).
//
// A rank that dies or stalls at an exact point of the lifecycle is how the
// tests show that the other ranks raise Timeout naming it instead of
// hanging, and that nothing is left behind. Killing a rank from outside
// lands at a random point; these named points make it exact.
//
//   PEERPLAN_FAULT_INJECT=<point>@<rank>:<action>[,<point>@<rank>:<action>...]
//
// <rank> is the rank in the communicator given to create(); <action> is
// `kill` (SIGKILL: the process vanishes as on a crash), `stop` (SIGSTOP:
// frozen until someone sends SIGCONT), `sleep=<ms>` (a slow rank) or
// `abort` (std::abort). Each rule fires once, the first time its point is
// reached (a stopped rank that is continued must not stop again at the
// next call). The points are listed in kFaultPoints (fault_injection.cpp). Unset (the normal case)
// costs one load of a flag per point reached. Never set it in production.
#pragma once

#include <string_view>

namespace peerplan::fault {

// Whether PEERPLAN_FAULT_INJECT names any point (read once per process).
bool armed() noexcept;

// Acts if PEERPLAN_FAULT_INJECT names (`point`, `rank`); else does nothing.
void reach(std::string_view point, int rank);

// Throws InvalidArgument when PEERPLAN_FAULT_INJECT is set but malformed or
// names a point that does not exist (create() calls this, so a typo in a
// test is an error, not a test that silently injects nothing).
void check_configuration();

// Test support: re-reads the variable (tests change it between cases).
void reload_for_tests();

}  // namespace peerplan::fault

// The cheap guard every point uses: one predictable branch when unarmed.
#define PEERPLAN_FAULT_POINT(point, rank)                                  \
  do {                                                                     \
    if (::peerplan::fault::armed()) ::peerplan::fault::reach(point, rank); \
  } while (0)
