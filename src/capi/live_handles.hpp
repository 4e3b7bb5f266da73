// SPDX-License-Identifier: Apache-2.0
// The handles the C interface handed out and has not destroyed yet, per
// handle type. Every entry point looks its handle up here before touching
// it, so a destroyed handle (use after destroy, double destroy) or a pointer
// that was never a handle gets an error instead of a read of freed memory:
// the lookup compares addresses only and never dereferences the pointer.
// A handle whose memory was reused for a new handle of the same type is
// indistinguishable from that new handle (docs/api-c.md says so).
#pragma once

#include <mutex>
#include <new>
#include <shared_mutex>
#include <unordered_set>

namespace peerplan::capi {

template <class Handle>
class LiveHandles {
 public:
  static void add(const Handle* handle) {
    const std::unique_lock lock(mutex());
    set().insert(handle);
  }
  // Whether `handle` was live and is no longer: false for one already
  // destroyed or never added (the caller must then not free it).
  static bool remove(const Handle* handle) {
    const std::unique_lock lock(mutex());
    return set().erase(handle) == 1;
  }
  static bool contains(const Handle* handle) {
    const std::shared_lock lock(mutex());
    return set().count(handle) == 1;
  }

 private:
  // Function-local statics: usable from any static initialiser, never
  // destroyed (a handle destroyed during exit must still find them), and
  // built in static storage, not allocated: the first lookup may come when
  // memory has run out, and nothing may throw across the C interface.
  static std::shared_mutex& mutex() {
    alignas(std::shared_mutex) static unsigned char storage[sizeof(std::shared_mutex)];
    static auto* m = ::new (static_cast<void*>(storage)) std::shared_mutex;
    return *m;
  }
  static std::unordered_set<const Handle*>& set() {
    using Set = std::unordered_set<const Handle*>;
    alignas(Set) static unsigned char storage[sizeof(Set)];
    static auto* s = ::new (static_cast<void*>(storage)) Set;  // allocates nothing while empty
    return *s;
  }
};

}  // namespace peerplan::capi
