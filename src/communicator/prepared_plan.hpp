// SPDX-License-Identifier: Apache-2.0
// What the communicator attaches to each declared plan in the index: the
// route and protocol chosen at declare, the launch the P2P transport
// prepared for it (or its pieces'), and the plan's counters. Owned by the index, so a
// replaced plan is destroyed (its counters and launch released) when
// declare() reclaims the old set.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "peerplan/route.hpp"
#include "plan/plan_entry.hpp"
#include "communicator/two_shot_pieces.hpp"
#include "core/nvtx_ranges.hpp"
#include "transport/transport.hpp"

namespace peerplan::communicator {

struct PreparedPlan final : plan::PlanPayload {
  PreparedPlan(Route r, FallbackReason why, Protocol how, std::size_t bytes,
               std::size_t input_alignment, std::uint64_t span, PlanLaunches prepared)
      : route(r),
        reason(why),
        protocol(how),
        message_bytes(bytes),
        alignment_mask(input_alignment - 1),
        span_bytes(span),
        launch(std::move(prepared.launch)),
        pieces(std::move(prepared.pieces)),
        launch_text(launch ? launch->describe() + (pieces ? pieces->describe() : "")
                           : std::string()) {}

  const Route route;
  const FallbackReason reason;  // none unless route == fallback
  const Protocol protocol;      // none on the fallback
  const std::size_t message_bytes;
  // What a call that hits this plan is checked against (call_checks.hpp),
  // copied from the declaration so the check reads one cache line:
  const std::uintptr_t alignment_mask;  // input_alignment - 1
  const std::uint64_t span_bytes;       // of the declared layout (fused: residual vs inout)
  // Set exactly when the route is not the fallback: what a hit runs.
  const std::unique_ptr<transport::PlanLaunch> launch;
  // Set when a two-shot runs in pieces: `launch` is then the launch of a
  // full piece (two_shot_pieces.hpp).
  const std::unique_ptr<const TwoShotPieces> pieces;
  // launch->describe(), made once: the route table, plan_for() and stats()
  // show it.
  const std::string launch_text;
  // The text of its calls' NVTX ranges, registered at declare while a
  // profiler records (communicator/call_ranges.hpp); else null.
  core::nvtx::Message nvtx_message;
  // Relaxed atomics: stats() may run on another thread than the calls.
  std::atomic<std::uint64_t> hits{0};
  std::atomic<std::uint64_t> fallbacks{0};
};

}  // namespace peerplan::communicator
