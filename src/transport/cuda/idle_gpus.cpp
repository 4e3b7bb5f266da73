// SPDX-License-Identifier: Apache-2.0
#include "transport/cuda/idle_gpus.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "bootstrap/fail_together.hpp"
#include "peerplan/errors.hpp"
#include "transport/cuda/bounded_wait.hpp"

namespace peerplan::transport::cuda {
namespace {

using std::chrono::microseconds;

// Rounds of equal slices that add up to the whole wait. A slice is at most
// half the timeout: a busy rank's verdict then reaches each agreement well
// inside the bound the idle ranks wait there (the bootstrap's, the same
// timeout).
std::int64_t rounds_for(microseconds budget, microseconds timeout) {
  const std::int64_t half = std::max<std::int64_t>(timeout.count() / 2, 1);
  return std::max<std::int64_t>((budget.count() + half - 1) / half, 1);
}

std::string busy_verdict(std::chrono::milliseconds budget) {
  return "its GPU was still running work queued earlier after " + milliseconds_text(budget) +
         " (PEERPLAN_TIMEOUT_MS + margin): a kernel that does not end, such as a fallback "
         "(NCCL) call that a peer never made";
}

}  // namespace

void wait_for_idle_gpus(bootstrap::Bootstrap& bootstrap, int device,
                        std::chrono::milliseconds timeout, std::string_view step) {
  const auto budget = timeout + kTeardownMargin;
  const std::int64_t rounds = rounds_for(budget, timeout);
  const auto slice = microseconds(budget) / rounds;
  // Every rank makes the same number of rounds (the same timeout on every
  // rank), whatever its own GPU does, so the ranks stay in step.
  for (std::int64_t round = 1; round < rounds; ++round) {
    if (bootstrap.agree(device_idle_by(device, TeardownClock::now() + slice))) return;
  }
  const bool idle = device_idle_by(device, TeardownClock::now() + slice);
  const auto failures = bootstrap::gather_failures(
      bootstrap, idle ? std::nullopt : std::optional<std::string>(busy_verdict(budget)));
  if (!failures) return;
  throw Timeout("peerplan cuda backend: " + std::string(step) + ": GPU work did not end (" +
                failures->message +
                "); no rank released the buffers that such work may still use. close() the "
                "communicator on every rank (it aborts NCCL, which ends its kernels) and create "
                "a new one.");
}

}  // namespace peerplan::transport::cuda
