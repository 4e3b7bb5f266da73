// SPDX-License-Identifier: Apache-2.0
// How the C interface keeps C++ exceptions from crossing it: every entry
// point runs its body through guarded(), which turns each exception into
// its peerplan_result_t and keeps the message for peerplan_last_error().
#pragma once

#include <string>

#include "peerplan/peerplan.h"

namespace peerplan::capi {

// This thread's last failure message.
std::string& last_error() noexcept;

// Records `message` and returns `result` (for failures found before any
// C++ call, e.g. a null handle).
peerplan_result_t fail(peerplan_result_t result, std::string message) noexcept;

// Runs body(); SUCCESS, or the failure of the exception it threw.
template <class Body>
peerplan_result_t guarded(Body&& body) noexcept;

// The exception in flight, as a result code (with its message recorded).
peerplan_result_t translate_current_exception() noexcept;

template <class Body>
peerplan_result_t guarded(Body&& body) noexcept {
  try {
    body();
    return PEERPLAN_SUCCESS;
  } catch (...) {
    return translate_current_exception();
  }
}

}  // namespace peerplan::capi
