// SPDX-License-Identifier: Apache-2.0
// The table behind Stats::undeclared: the most frequent undeclared keys in
// a fixed number of slots ("space saving": a new key with the table full
// replaces the least counted one and inherits its count as overcount). It
// never grows with the number of distinct shapes, and it is apart from the
// plan index, whose contract (a miss inserts nothing) it leaves alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "peerplan/plan_key.hpp"
#include "peerplan/route.hpp"

namespace peerplan::communicator {

class UndeclaredKeys {
 public:
  explicit UndeclaredKeys(std::size_t capacity);

  // Counts one call of `key`. Thread-safe with snapshot() (a monitoring
  // thread may read Stats while calls run).
  void record(const PlanKey& key);
  // Most calls first (ties: the key seen first in the table first).
  std::vector<UndeclaredKeyStats> snapshot() const;
  void reset();

 private:
  struct Slot {
    PlanKey key;
    std::uint64_t calls = 0;
    std::uint64_t overcount = 0;
  };
  std::size_t capacity_;
  mutable std::mutex mutex_;
  std::vector<Slot> slots_;
};

}  // namespace peerplan::communicator
