// SPDX-License-Identifier: Apache-2.0
#include "plan/norm_text.hpp"

#include <bit>
#include <charconv>
#include <cstdio>

namespace peerplan::plan {

std::string weight_address_text(std::uintptr_t weight) {
  char buffer[2 + 16 + 1];
  std::snprintf(buffer, sizeof buffer, "0x%llx", static_cast<unsigned long long>(weight));
  return buffer;
}

std::string norm_text(const PlanKey& key) {
  if (key.operation == Operation::all_reduce) return {};
  char buffer[48];
  std::string out = "weight " + weight_address_text(key.weight);
  const auto result =
      std::to_chars(buffer, buffer + sizeof buffer, std::bit_cast<float>(key.eps_bits));
  out += " eps ";
  out.append(buffer, result.ptr);
  return out;
}

}  // namespace peerplan::plan
