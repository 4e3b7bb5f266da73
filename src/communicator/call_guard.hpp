// SPDX-License-Identifier: Apache-2.0
// One thread at a time per communicator, as with NCCL. Two threads inside
// calls on one communicator interleave their collectives: the fallback
// then returns wrong sums and the P2P routes wait for arrivals that never
// match. Every collective entry point (all_reduce, fused_add_rms_norm,
// declare, register_buffers, deregister_buffers, close) therefore takes
// the communicator's call slot for its whole duration; a call that finds
// the slot taken raises InvalidUsage naming the rule instead of running.
//
// Cost on the hot path: one uncontended compare-and-swap to take the slot
// and one release store to free it (a few nanoseconds; no lock, no
// syscall). The acquire/release pair also orders calls that different
// threads make one after the other, which the rule allows.
#pragma once

#include <atomic>

namespace peerplan::communicator {

// Throws InvalidUsage: `what` was called while `holder` runs.
[[noreturn]] void throw_concurrent_call(const char* what, const char* holder);

class CallGuard {
 public:
  // `slot` holds the name of the call in progress (a string literal), or
  // null when none is.
  CallGuard(std::atomic<const char*>& slot, const char* what) : slot_(slot) {
    const char* holder = nullptr;
    if (!slot_.compare_exchange_strong(holder, what, std::memory_order_acquire,
                                       std::memory_order_relaxed)) [[unlikely]] {
      throw_concurrent_call(what, holder);  // the slot stays the holder's
    }
  }
  // Runs on every exit of the call, exceptions included.
  ~CallGuard() { slot_.store(nullptr, std::memory_order_release); }

  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;

 private:
  std::atomic<const char*>& slot_;
};

}  // namespace peerplan::communicator
