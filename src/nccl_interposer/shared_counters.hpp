// SPDX-License-Identifier: Apache-2.0
// One communicator's DispatchCounters, counted from any thread. Every call
// is counted, so the first sizes a communicator sees get slots of atomic
// counts, found without a lock; a size that comes after every slot is taken
// is counted under a lock. The summary merges both.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <limits>
#include <mutex>
#include <string>

#include "nccl_interposer/dispatch_rules.hpp"

namespace peerplan::nccl_interposer {

class SharedDispatchCounters {
 public:
  static constexpr std::size_t kSlots = 8;

  void hit(std::size_t bytes);
  void fallback(std::size_t bytes, FallbackCause cause);
  // As DispatchCounters::summary of every call counted so far.
  std::string summary() const;

 private:
  static constexpr std::size_t kFree = std::numeric_limits<std::size_t>::max();
  static constexpr std::size_t kCauses = static_cast<std::size_t>(FallbackCause::count_);
  struct Slot {
    std::atomic<std::size_t> bytes{kFree};  // set once, never freed
    std::atomic<std::size_t> hits{0};
    std::array<std::atomic<std::size_t>, kCauses> fallbacks{};
  };
  // The slot of `bytes`, taken if need be; null once every slot holds
  // another size.
  Slot* slot_for(std::size_t bytes);

  std::array<Slot, kSlots> slots_;
  mutable std::mutex overflow_mutex_;
  DispatchCounters overflow_;  // the sizes without a slot
};

}  // namespace peerplan::nccl_interposer
