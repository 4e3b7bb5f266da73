// What the communicator attaches to each declared plan in the index: the
// route chosen at declare and the plan's counters. Owned by the index, so a
// replaced plan is destroyed (its counters and any per-plan resources
// released) when declare() reclaims the old set.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "peerplan/route.hpp"
#include "plan/plan_entry.hpp"

namespace peerplan::communicator {

struct PreparedPlan final : plan::PlanPayload {
  PreparedPlan(Route r, FallbackReason why, std::size_t bytes, std::size_t input_alignment,
               std::uint64_t span)
      : route(r),
        reason(why),
        message_bytes(bytes),
        alignment_mask(input_alignment - 1),
        span_bytes(span) {}

  const Route route;
  const FallbackReason reason;  // none unless route == fallback
  const std::size_t message_bytes;
  // What a call that hits this plan is checked against (call_checks.hpp),
  // copied from the declaration so the check reads one cache line:
  const std::uintptr_t alignment_mask;  // input_alignment - 1
  const std::uint64_t span_bytes;       // of the declared layout (fused: residual vs inout)
  // Relaxed atomics: stats() may run on another thread than the calls.
  std::atomic<std::uint64_t> hits{0};
  std::atomic<std::uint64_t> fallbacks{0};
};

}  // namespace peerplan::communicator
