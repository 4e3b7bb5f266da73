// SPDX-License-Identifier: Apache-2.0
// PEERPLAN_* names in the environment that nothing in peerplan reads. Most
// are misspellings (PEERPLAN_TIMOUT_MS), which would otherwise be ignored
// without a word; create() warns about them once per process.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace peerplan::core {

struct UnknownVariable {
  std::string name;
  std::string suggestion;  // the closest known name, or "" when none is close
  friend bool operator==(const UnknownVariable&, const UnknownVariable&) = default;
};

// The names of `environment` (NAME or NAME=value entries, as in `environ`)
// that start with PEERPLAN_ and are not read by the library, the Python
// package or the project's scripts.
std::vector<UnknownVariable> unknown_variables(std::span<const std::string_view> environment);

// "unknown variable PEERPLAN_TIMOUT_MS (did you mean PEERPLAN_TIMEOUT_MS?)"
std::string describe(const UnknownVariable& unknown);

// Logs one WARN naming every unknown PEERPLAN_* variable of the process
// environment; only the first call of the process does anything.
void warn_unknown_variables_once();

}  // namespace peerplan::core
