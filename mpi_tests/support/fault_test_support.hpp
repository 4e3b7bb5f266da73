// SPDX-License-Identifier: Apache-2.0
// Helpers of the MPI tests that make a rank late, stalled or absent and
// check what the others raise (timeout, create-timeout and fallback-fault
// tests). Header-only.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "core/fault_injection.hpp"
#include "peerplan/errors.hpp"
#include "support/communicator_test_support.hpp"

namespace peerplan::comm_test {

// What a call did on this rank.
struct Attempt {
  bool timed_out = false;
  // The Timeout's message, else what happened instead ("returned normally",
  // "threw another error: ...").
  std::string message;
  std::chrono::steady_clock::duration elapsed{};
  double elapsed_ms() const { return std::chrono::duration<double, std::milli>(elapsed).count(); }
};

template <class Call>
Attempt attempt(Call&& call) {
  Attempt a;
  const auto start = std::chrono::steady_clock::now();
  try {
    call();
    a.message = "returned normally";
  } catch (const Timeout& e) {
    a.timed_out = true;
    a.message = e.what();
  } catch (const std::exception& e) {
    a.message = std::string("threw another error: ") + e.what();
  }
  a.elapsed = std::chrono::steady_clock::now() - start;
  return a;
}

// PEERPLAN_FAULT_INJECT set to `rule` for the lifetime of the object, read
// again by the library at both ends (every rank sets the same rule; the
// rule names the rank it applies to). An empty rule sets nothing.
class ScopedFaultInjection {
 public:
  explicit ScopedFaultInjection(const std::string& rule) {
    env_.emplace("PEERPLAN_FAULT_INJECT", rule.empty() ? nullptr : rule.c_str());
    fault::reload_for_tests();
  }
  ~ScopedFaultInjection() {
    env_.reset();  // the variable as it was, then the library reads it again
    fault::reload_for_tests();
  }
  ScopedFaultInjection(const ScopedFaultInjection&) = delete;
  ScopedFaultInjection& operator=(const ScopedFaultInjection&) = delete;

 private:
  std::optional<ScopedEnv> env_;
};

}  // namespace peerplan::comm_test
