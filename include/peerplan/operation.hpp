// SPDX-License-Identifier: Apache-2.0
// The collectives a plan can be declared for.
#pragma once

#include <cstdint>

#include "peerplan/export.h"

namespace peerplan {

enum class Operation : std::uint8_t {
  all_reduce = 0,
  // residual = allreduce(inout) + residual; inout = rmsnorm(residual) * weight
  // (in place, the semantics of vLLM's fused_add_rms_norm).
  fused_add_rms_norm = 1,
};

PEERPLAN_API const char* to_string(Operation op) noexcept;

}  // namespace peerplan
