// SPDX-License-Identifier: Apache-2.0
// The calls the fake NCCL (fake_nccl.cpp, PEERPLAN_FAKE_NCCL) recorded, one
// line each, for the tests linked with the interposer.
#pragma once

#include <dlfcn.h>

#include <string>

namespace peerplan::nccl_interposer {

inline void* fake_nccl() {
  static void* fake = dlopen(PEERPLAN_FAKE_NCCL, RTLD_NOW);
  return fake;
}

// What the fake NCCL recorded so far; `clear` starts a new record.
inline std::string fake_nccl_calls(bool clear = true) {
  void* fake = fake_nccl();
  using Log = const char* (*)();
  using Clear = void (*)();
  static auto log = reinterpret_cast<Log>(dlsym(fake, "fake_nccl_log"));
  static auto clear_log = reinterpret_cast<Clear>(dlsym(fake, "fake_nccl_clear"));
  std::string calls = log();
  if (clear) clear_log();
  return calls;
}

// NCCL's last error becomes `text`, as after a failure in a function the
// interposer does not define.
inline void fake_nccl_fail_elsewhere(const char* text) {
  using Fail = void (*)(const char*);
  static auto fail = reinterpret_cast<Fail>(dlsym(fake_nccl(), "fake_nccl_fail_elsewhere"));
  fail(text);
}

// The next real ncclGroupEnd returns `result`.
inline void fake_nccl_fail_next_group_end(int result) {
  using Fail = void (*)(int);
  static auto fail = reinterpret_cast<Fail>(dlsym(fake_nccl(), "fake_nccl_fail_next_group_end"));
  fail(result);
}

// While `hang`, every real ncclAllGather is one a peer never joins: it
// stays pending on its communicator until ncclCommAbort, and the fake's
// finalize or destroy of that communicator records that it would wait
// forever.
inline void fake_nccl_hang_all_gathers(bool hang) {
  using Hang = void (*)(bool);
  static auto set = reinterpret_cast<Hang>(dlsym(fake_nccl(), "fake_nccl_hang_all_gathers"));
  set(hang);
}

// While `result` is not ncclSuccess, every real ncclAllGather returns it at
// once (NCCL failed to enqueue it) and queues nothing; ncclSuccess ends that.
inline void fake_nccl_fail_all_gathers(int result) {
  using Fail = void (*)(int);
  static auto set = reinterpret_cast<Fail>(dlsym(fake_nccl(), "fake_nccl_fail_all_gathers"));
  set(result);
}

// How many all-gathers that never complete `comm` holds.
inline int fake_nccl_pending(void* comm) {
  using Pending = int (*)(void*);
  static auto count = reinterpret_cast<Pending>(dlsym(fake_nccl(), "fake_nccl_pending"));
  return count(comm);
}

}  // namespace peerplan::nccl_interposer
