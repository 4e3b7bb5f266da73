// SPDX-License-Identifier: Apache-2.0
// What the environment declares: PEERPLAN_NCCL_DECLARE and the plan file
// PEERPLAN_PLAN_FILE names, read through an injected lookup (tests) or the
// process environment (declared_from_environment, dispatch_rules.hpp).
#pragma once

#include <string_view>
#include <vector>

#include "core/environment.hpp"
#include "nccl_interposer/dispatch_rules.hpp"

namespace peerplan::nccl_interposer {

inline constexpr std::string_view kDeclareVariable = "PEERPLAN_NCCL_DECLARE";
inline constexpr std::string_view kPlanFileVariable = "PEERPLAN_PLAN_FILE";

// Either, both or neither may be set (an empty value counts as unset); the
// result is merged, without repeats, sorted. Throws InvalidArgument naming
// the variable (and the file's line) at fault, or a file it cannot read.
std::vector<DeclaredBuffer> declared_from(const EnvironmentLookup& lookup);

}  // namespace peerplan::nccl_interposer
