// SPDX-License-Identifier: Apache-2.0
// Error types of the public API. Every failure peerplan reports is a
// peerplan::Error carrying a code, so callers can branch on the kind of
// failure without parsing messages (the C ABI maps the same codes).
#pragma once

#include <stdexcept>
#include <string>

#include "peerplan/export.h"

namespace peerplan {

enum class ErrorCode : int {
  ok = 0,
  invalid_argument = 1,  // a value the caller passed is wrong; the message says which
  invalid_usage = 2,     // right values, wrong moment (e.g. a call after close())
  undeclared_plan = 3,   // a strict lookup of a key nobody declared
  mismatch = 4,          // ranks disagree (declarations, world size, ...)
  timeout = 5,           // a bounded wait expired; another rank probably stopped
  cuda_error = 6,
  nccl_error = 7,
  mpi_error = 8,
  system_error = 9,  // an OS call failed (shared memory, mmap, ...)
  unsupported = 10,  // valid request this build or machine cannot serve
  internal = 11,     // a bug in peerplan; please report it
};

PEERPLAN_API const char* to_string(ErrorCode code) noexcept;

// PEERPLAN_API: an application catches these by type, so their type
// information must be the library's (export.h).
class PEERPLAN_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

#define PEERPLAN_DEFINE_ERROR(Name, Code)                               \
  class PEERPLAN_API Name : public Error {                              \
   public:                                                              \
    explicit Name(const std::string& message) : Error(Code, message) {} \
  };

PEERPLAN_DEFINE_ERROR(InvalidArgument, ErrorCode::invalid_argument)
PEERPLAN_DEFINE_ERROR(InvalidUsage, ErrorCode::invalid_usage)
PEERPLAN_DEFINE_ERROR(UndeclaredPlan, ErrorCode::undeclared_plan)
PEERPLAN_DEFINE_ERROR(Mismatch, ErrorCode::mismatch)
PEERPLAN_DEFINE_ERROR(Timeout, ErrorCode::timeout)
PEERPLAN_DEFINE_ERROR(CudaError, ErrorCode::cuda_error)
PEERPLAN_DEFINE_ERROR(NcclError, ErrorCode::nccl_error)
PEERPLAN_DEFINE_ERROR(MpiError, ErrorCode::mpi_error)
PEERPLAN_DEFINE_ERROR(SystemError, ErrorCode::system_error)
PEERPLAN_DEFINE_ERROR(Unsupported, ErrorCode::unsupported)
PEERPLAN_DEFINE_ERROR(InternalError, ErrorCode::internal)

#undef PEERPLAN_DEFINE_ERROR

}  // namespace peerplan
