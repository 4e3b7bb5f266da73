// SPDX-License-Identifier: Apache-2.0
#include "plan/repeated_keys.hpp"

#include <unordered_map>

#include "peerplan/plan_key.hpp"

namespace peerplan::plan {

std::vector<RepeatedKey> find_repeated_keys(std::span<const Declaration> declarations) {
  std::unordered_map<PlanKey, std::size_t, PlanKeyHash> first_with_key;
  first_with_key.reserve(declarations.size());
  std::vector<RepeatedKey> repeats;
  for (std::size_t position = 0; position < declarations.size(); ++position) {
    const auto [it, inserted] = first_with_key.emplace(make_key(declarations[position]), position);
    if (!inserted) repeats.push_back({position, it->second});
  }
  return repeats;
}

}  // namespace peerplan::plan
