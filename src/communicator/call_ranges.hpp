// SPDX-License-Identifier: Apache-2.0
// The NVTX range of each all_reduce and fused_add_rms_norm call
// (core/nvtx_ranges.hpp), in the fallback's colour when the call takes the
// fallback. A declared plan's text is registered with the tool once, at
// declare, so a call on it passes a handle and builds no text; an
// undeclared call formats its text on the stack, and only while a tool
// records. With no tool (or PEERPLAN_NVTX=0) a call pays one branch.
#pragma once

#include "communicator/prepared_plan.hpp"
#include "core/nvtx_ranges.hpp"
#include "peerplan/declaration.hpp"
#include "routing/router.hpp"

namespace peerplan::communicator {

// The text of a declared plan's calls, e.g. "all_reduce 'decode': one_shot
// ll, 16384 B" or "all_reduce 'prefill': fallback (above_cutoff), 16777216
// B", registered in `domain`; null without a tool.
core::nvtx::Message register_plan_message(core::nvtx::Domain domain, const Declaration& declared,
                                          const routing::RouteDecision& decision);

class CallRange {
 public:
  // `plan` is null for an undeclared call.
  CallRange(core::nvtx::Domain domain, Operation op, const PreparedPlan* plan, DataType dtype,
            const TensorLayout& layout) noexcept
      : domain_(domain) {
    if (domain_) [[unlikely]]
      push(op, plan, dtype, layout);
  }
  ~CallRange() {
    if (domain_) [[unlikely]]
      core::nvtx::pop(domain_);
  }
  CallRange(const CallRange&) = delete;
  CallRange& operator=(const CallRange&) = delete;

 private:
  void push(Operation op, const PreparedPlan* plan, DataType dtype,
            const TensorLayout& layout) noexcept;

  core::nvtx::Domain domain_;
};

}  // namespace peerplan::communicator
