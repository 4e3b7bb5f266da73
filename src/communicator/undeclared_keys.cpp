// SPDX-License-Identifier: Apache-2.0
#include "communicator/undeclared_keys.hpp"

#include <algorithm>

namespace peerplan::communicator {

UndeclaredKeys::UndeclaredKeys(std::size_t capacity) : capacity_(capacity) {
  slots_.reserve(capacity);
}

void UndeclaredKeys::record(const PlanKey& key) {
  if (capacity_ == 0) return;
  const std::lock_guard lock(mutex_);
  // A linear scan: at most kMaxUndeclaredKeysTracked slots, on the fallback
  // path only, whose MPI or NCCL call costs far more.
  for (Slot& slot : slots_) {
    if (slot.key == key) {
      ++slot.calls;
      return;
    }
  }
  if (slots_.size() < capacity_) {
    slots_.push_back({key, 1, 0});
    return;
  }
  auto least = std::min_element(slots_.begin(), slots_.end(),
                                [](const Slot& a, const Slot& b) { return a.calls < b.calls; });
  least->overcount = least->calls;
  least->calls += 1;
  least->key = key;
}

std::vector<UndeclaredKeyStats> UndeclaredKeys::snapshot() const {
  std::vector<Slot> copy;
  {
    const std::lock_guard lock(mutex_);
    copy = slots_;
  }
  std::stable_sort(copy.begin(), copy.end(),
                   [](const Slot& a, const Slot& b) { return a.calls > b.calls; });
  std::vector<UndeclaredKeyStats> out;
  out.reserve(copy.size());
  for (const Slot& slot : copy) out.push_back({slot.key.to_string(), slot.calls, slot.overcount});
  return out;
}

void UndeclaredKeys::reset() {
  const std::lock_guard lock(mutex_);
  slots_.clear();
}

}  // namespace peerplan::communicator
