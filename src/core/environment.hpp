// SPDX-License-Identifier: Apache-2.0
// PEERPLAN_* environment overrides, beyond the public
// apply_environment(Config): a variant that reports what it applied (the
// communicator logs each line once at INFO) and one that reads from an
// injected lookup instead of the process environment (tests).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "peerplan/config.hpp"

namespace peerplan {

// Returns the value of the named variable, or nullptr when it is unset.
// Same contract as std::getenv.
using EnvironmentLookup = std::function<const char*(const char* name)>;

// Like apply_environment(Config), reading the process environment. When
// `applied` is not null, appends one line per variable applied, e.g.
// "PEERPLAN_TIMEOUT_MS=5000 (timeout 5000 ms)".
Config apply_environment(Config config, std::vector<std::string>* applied);

// Same, with every variable read through `lookup`. `setter` names the call
// the values came through (e.g. "peerplan_config_set"), so that its errors
// say so; empty: the process environment.
Config apply_environment_from(Config config, const EnvironmentLookup& lookup,
                              std::vector<std::string>* applied = nullptr,
                              std::string_view setter = {});

// Every variable apply_environment reads, in the order it applies them.
std::vector<std::string_view> environment_variable_names();

// The variables of earlier releases that apply_environment refuses, naming
// the variable that replaced each.
std::vector<std::string_view> retired_environment_variable_names();

}  // namespace peerplan
