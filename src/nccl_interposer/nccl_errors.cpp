// SPDX-License-Identifier: Apache-2.0
// peerplan's errors in NCCL's terms: a Timeout means another rank stopped
// (NCCL's remote error), a bad argument or a call at the wrong moment keeps
// its meaning, and anything else is the library's own failure.
#include "nccl_interposer/nccl_errors.hpp"

#include "nccl_interposer/dispatch_rules.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::nccl_interposer {

int nccl_result_for(const std::exception& error) noexcept {
  const auto* peerplan_error = dynamic_cast<const Error*>(&error);
  if (peerplan_error == nullptr) return kNcclInternalError;
  switch (peerplan_error->code()) {
    case ErrorCode::timeout:
      return kNcclRemoteError;
    case ErrorCode::invalid_argument:
      return kNcclInvalidArgument;
    case ErrorCode::invalid_usage:
      return kNcclInvalidUsage;
    default:
      return kNcclInternalError;
  }
}

}  // namespace peerplan::nccl_interposer
