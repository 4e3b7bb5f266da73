// SPDX-License-Identifier: Apache-2.0
// How a rank waits for its peers on the host backend: spin briefly (the
// common case, all ranks on their own cores, is a few hundred nanoseconds
// away), then yield, then sleep a few microseconds. Ranks often outnumber
// cores (CI runs 4 ranks on 2), and a spinning waiter then steals the time
// slice of the very rank it waits for.
#pragma once

#include <chrono>
#include <thread>

namespace peerplan::transport::host {

class Backoff {
 public:
  void pause() {
    ++iteration_;
    if (iteration_ < kSpins) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      return;
    }
    if (iteration_ < kSpins + kYields) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }

 private:
  static constexpr unsigned kSpins = 64;
  static constexpr unsigned kYields = 2000;
  unsigned iteration_ = 0;
};

}  // namespace peerplan::transport::host
