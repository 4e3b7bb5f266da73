// SPDX-License-Identifier: Apache-2.0
// How the C interface keeps C++ exceptions from crossing it: every entry
// point runs its body through guarded(), which turns each exception into
// its peerplan_result_t and keeps the message for peerplan_last_error().
#pragma once

#include <string>
#include <type_traits>

#include "peerplan/peerplan.h"

namespace peerplan::capi {

// This thread's last failure message.
std::string& last_error() noexcept;

// Records `message` and returns `result` (for failures found before any
// C++ call, e.g. a null handle).
peerplan_result_t fail(peerplan_result_t result, const char* message) noexcept;

// The same for a message that has to be built: building it may throw
// (out of memory), so it is built here, inside the guard - never as the
// argument of a call, where the exception would cross the C interface.
template <class MakeMessage>
requires std::is_invocable_r_v<std::string, MakeMessage> peerplan_result_t
fail_with(peerplan_result_t result, MakeMessage&& make_message)
noexcept;

// Runs body(); SUCCESS, or the failure of the exception it threw.
template <class Body>
peerplan_result_t guarded(Body&& body) noexcept;

// The exception in flight, as a result code (with its message recorded).
peerplan_result_t translate_current_exception() noexcept;

template <class MakeMessage>
requires std::is_invocable_r_v<std::string, MakeMessage> peerplan_result_t
fail_with(peerplan_result_t result, MakeMessage&& make_message)
noexcept {
  try {
    last_error() = make_message();
  } catch (...) {
    last_error().clear();  // no memory for the message: the code alone says what happened
  }
  return result;
}

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
