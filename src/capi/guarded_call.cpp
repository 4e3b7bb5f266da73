// SPDX-License-Identifier: Apache-2.0
#include "capi/guarded_call.hpp"

#include <exception>
#include <new>

#include "peerplan/errors.hpp"

namespace peerplan::capi {

std::string& last_error() noexcept {
  thread_local std::string message;
  return message;
}

peerplan_result_t fail(peerplan_result_t result, const char* message) noexcept {
  return fail_with(result, [message] { return std::string(message); });
}

peerplan_result_t translate_current_exception() noexcept {
  try {
    throw;
  } catch (const Error& e) {
    // ErrorCode and peerplan_result_t share their numbers (peerplan.h).
    return fail(static_cast<peerplan_result_t>(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(PEERPLAN_ERROR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail_with(PEERPLAN_ERROR_INTERNAL, [&] {
      return std::string("unexpected error: ") + e.what() + "; please report this";
    });
  } catch (...) {
    return fail(PEERPLAN_ERROR_INTERNAL, "unexpected non-standard exception; please report this");
  }
}

}  // namespace peerplan::capi
