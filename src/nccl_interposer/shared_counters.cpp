// SPDX-License-Identifier: Apache-2.0
#include "nccl_interposer/shared_counters.hpp"

namespace peerplan::nccl_interposer {

// Slots are taken in order and never given back, so a size is in at most
// one slot: a thread that finds slot i taken by another size would find the
// same there later, and two threads taking one free slot for the same size
// both end up in it.
SharedDispatchCounters::Slot* SharedDispatchCounters::slot_for(std::size_t bytes) {
  if (bytes == kFree) return nullptr;  // the free mark itself (an overflowing size)
  for (Slot& slot : slots_) {
    std::size_t held = slot.bytes.load(std::memory_order_acquire);
    if (held == kFree &&
        slot.bytes.compare_exchange_strong(held, bytes, std::memory_order_acq_rel)) {
      return &slot;
    }
    if (held == bytes) return &slot;
  }
  return nullptr;
}

void SharedDispatchCounters::hit(std::size_t bytes) {
  if (Slot* slot = slot_for(bytes)) {
    slot->hits.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::lock_guard lock(overflow_mutex_);
  overflow_.hit(bytes);
}

void SharedDispatchCounters::fallback(std::size_t bytes, FallbackCause cause) {
  // As DispatchCounters::fallback: count_ is no cause.
  if (cause >= FallbackCause::count_) cause = FallbackCause::peerplan_error;
  if (Slot* slot = slot_for(bytes)) {
    slot->fallbacks[static_cast<std::size_t>(cause)].fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::lock_guard lock(overflow_mutex_);
  overflow_.fallback(bytes, cause);
}

std::string SharedDispatchCounters::summary() const {
  DispatchCounters all;
  {
    const std::lock_guard lock(overflow_mutex_);
    all = overflow_;
  }
  for (const Slot& slot : slots_) {
    const std::size_t bytes = slot.bytes.load(std::memory_order_acquire);
    if (bytes == kFree) continue;
    // A slot taken by a call that has not counted yet adds no size.
    if (const std::size_t hits = slot.hits.load(std::memory_order_relaxed)) all.hit(bytes, hits);
    for (std::size_t i = 0; i < kCauses; ++i) {
      if (const std::size_t calls = slot.fallbacks[i].load(std::memory_order_relaxed)) {
        all.fallback(bytes, static_cast<FallbackCause>(i), calls);
      }
    }
  }
  return all.summary();
}

}  // namespace peerplan::nccl_interposer
