// SPDX-License-Identifier: Apache-2.0
// "weight 0x7f3a1c000000 eps 1e-06": the part of a fused op's key that its
// shape does not show. A fused call misses its plan when the weight
// pointer or eps differ from the declaration's, so every message that
// names a fused key or call (PlanKey::to_string, the INFO route table, the
// TRACE line of each call) prints them in this one form, which a user can
// compare by eye.
#pragma once

#include <cstdint>
#include <string>

#include "peerplan/plan_key.hpp"

namespace peerplan::plan {

// Empty for an all-reduce key. The eps printed is the key's (-0.0 shows as
// 0, as it is compared), in the shortest text that reads back as the same
// float: two keys whose eps differ in the last bit print differently.
std::string norm_text(const PlanKey& key);

// "0x7f3a1c000000": a weight address as norm_text prints it.
std::string weight_address_text(std::uintptr_t weight);

}  // namespace peerplan::plan
