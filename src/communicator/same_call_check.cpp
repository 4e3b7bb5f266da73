// SPDX-License-Identifier: Apache-2.0
#include "communicator/same_call_check.hpp"

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "peerplan/errors.hpp"

namespace peerplan::communicator {
namespace {

static_assert(std::is_trivially_copyable_v<PlanKey>, "keys travel as bytes");

PlanKey without_weight(PlanKey key) {
  key.weight = 0;
  return key;
}

}  // namespace

void require_same_call(bootstrap::Bootstrap& bootstrap, const PlanKey& key) {
  const auto all =
      bootstrap.allgather(std::span(reinterpret_cast<const std::byte*>(&key), sizeof key));
  std::vector<PlanKey> keys(all.size());
  bool same = true;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].size() != sizeof(PlanKey)) {
      throw Mismatch("check_calls: rank " + std::to_string(r) +
                     " sent a call key this build cannot read (" + std::to_string(all[r].size()) +
                     " bytes); every rank must run the same peerplan build");
    }
    std::memcpy(&keys[r], all[r].data(), sizeof(PlanKey));
    same = same && without_weight(keys[r]) == without_weight(key);
  }
  if (same) return;
  std::string calls;
  for (std::size_t r = 0; r < keys.size(); ++r) {
    calls += "\n  rank " + std::to_string(r) + ": " + keys[r].to_string();
  }
  throw Mismatch(
      "the ranks made different calls at this point (PEERPLAN_CHECK_CALLS=1 compared them; "
      "nothing was launched):" +
      calls +
      "\nEvery rank must make the same calls (operation, dtype, shape, strides, eps) in "
      "the same order");
}

}  // namespace peerplan::communicator
