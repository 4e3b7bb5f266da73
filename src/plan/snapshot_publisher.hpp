// SPDX-License-Identifier: Apache-2.0
// Publication of immutable snapshots to lock-free readers, shared by the
// hash index and the linear scan (the tests' and the lookup benchmark's
// reference, tests/support/oracles/plan_scan.hpp) so that both honour the
// same atomicity and reclamation contract.
//
// A writer builds the next snapshot completely, off to the side, then makes
// it current with ONE atomic pointer store (release). A reader does one
// acquire load and works on whatever snapshot it got, so it sees the old set
// or the new one, never a mix. The replaced snapshot cannot be freed at that
// moment - a reader on another thread may still be probing it or holding a
// pointer into it - so it moves to a retired list and is freed only by
// reclaim_retired() or the destructor, which the owner calls when no reader
// can be active (the communicator: at declare/close, which by API contract
// are not concurrent with other calls on the same communicator).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace peerplan::plan {

template <class Snapshot>
class SnapshotPublisher {
 public:
  explicit SnapshotPublisher(std::unique_ptr<Snapshot> initial)
      : live_(std::move(initial)), current_(live_.get()) {}

  SnapshotPublisher(const SnapshotPublisher&) = delete;
  SnapshotPublisher& operator=(const SnapshotPublisher&) = delete;

  // Readers: never null.
  const Snapshot* current() const noexcept { return current_.load(std::memory_order_acquire); }

  // Writers (serialised by a mutex, so that a misuse by the caller cannot
  // corrupt the lists; readers never take it). Strong guarantee: if the
  // retired list cannot grow, nothing changes.
  void publish(std::unique_ptr<Snapshot> next) {
    std::lock_guard lock(writer_mutex_);
    if (retired_.size() == retired_.capacity()) {
      retired_.reserve(retired_.capacity() < 4 ? 4 : 2 * retired_.capacity());
    }
    current_.store(next.get(), std::memory_order_release);
    retired_.push_back(std::move(live_));
    live_ = std::move(next);
  }

  // Frees every replaced snapshot (running their payloads' destructors).
  // The caller guarantees no reader still uses one. Returns how many.
  std::size_t reclaim_retired() noexcept {
    std::vector<std::unique_ptr<Snapshot>> doomed;
    {
      std::lock_guard lock(writer_mutex_);
      doomed.swap(retired_);
    }
    return doomed.size();  // destroyed here, outside the lock
  }

  std::size_t retired_count() const noexcept {
    std::lock_guard lock(writer_mutex_);
    return retired_.size();
  }

 private:
  mutable std::mutex writer_mutex_;
  std::unique_ptr<Snapshot> live_;                  // what current_ points to
  std::vector<std::unique_ptr<Snapshot>> retired_;  // replaced, not yet freed
  std::atomic<const Snapshot*> current_;
};

}  // namespace peerplan::plan
