// SPDX-License-Identifier: Apache-2.0
// The CUDA push transport's protocol windows as it reports them with the
// default kernel choices (an independent statement of docs/concepts.md,
// "Routes" to "What a call launches"), for the routing tests.
#pragma once

#include <cstddef>

#include "routing/protocol_choice.hpp"

namespace peerplan::routing::test {

inline ProtocolWindows cuda_push_windows() {
  constexpr std::size_t kKiB = 1024;
  ProtocolWindows w;
  w.lines = true;
  w.tunable = true;
  w.one_shot_lamport = Window::above_bytes(64 * kKiB);
  w.fused_lamport = Window{64 * kKiB, 4096 * kKiB};
  w.fused_ll = Window::up_to_bytes(2048 * kKiB);
  w.fused_two_shot = true;
  return w;
}

}  // namespace peerplan::routing::test
