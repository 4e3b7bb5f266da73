// SPDX-License-Identifier: Apache-2.0
// Names of error codes, for messages and the C ABI's peerplan_error_name.
#include "peerplan/errors.hpp"

namespace peerplan {

const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::ok:
      return "ok";
    case ErrorCode::invalid_argument:
      return "invalid_argument";
    case ErrorCode::invalid_usage:
      return "invalid_usage";
    case ErrorCode::undeclared_plan:
      return "undeclared_plan";
    case ErrorCode::mismatch:
      return "mismatch";
    case ErrorCode::timeout:
      return "timeout";
    case ErrorCode::cuda_error:
      return "cuda_error";
    case ErrorCode::nccl_error:
      return "nccl_error";
    case ErrorCode::mpi_error:
      return "mpi_error";
    case ErrorCode::system_error:
      return "system_error";
    case ErrorCode::unsupported:
      return "unsupported";
    case ErrorCode::internal:
      return "internal";
  }
  // A value outside the enum (e.g. an int from the C ABI cast blindly).
  return "unknown";
}

}  // namespace peerplan
