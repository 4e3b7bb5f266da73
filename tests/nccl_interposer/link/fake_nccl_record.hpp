// SPDX-License-Identifier: Apache-2.0
// The calls the fake NCCL (fake_nccl.cpp, PEERPLAN_FAKE_NCCL) recorded, one
// line each, for the tests linked with the interposer.
#pragma once

#include <dlfcn.h>

#include <string>

namespace peerplan::nccl_interposer {

// What the fake NCCL recorded so far; `clear` starts a new record.
inline std::string fake_nccl_calls(bool clear = true) {
  static void* fake = dlopen(PEERPLAN_FAKE_NCCL, RTLD_NOW);
  using Log = const char* (*)();
  using Clear = void (*)();
  static auto log = reinterpret_cast<Log>(dlsym(fake, "fake_nccl_log"));
  static auto clear_log = reinterpret_cast<Clear>(dlsym(fake, "fake_nccl_clear"));
  std::string calls = log();
  if (clear) clear_log();
  return calls;
}

}  // namespace peerplan::nccl_interposer
