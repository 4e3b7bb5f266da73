// SPDX-License-Identifier: Apache-2.0
// PLACEHOLDER for part A's rules (dispatch_rules.cpp etc.): just enough to
// compile and link the shared library. Drop at merge.
#include <string>

#include "nccl_interposer/dispatch_rules.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::nccl_interposer {

std::vector<DeclaredBuffer> parse_declare_spec(std::string_view) { return {}; }
std::vector<DeclaredBuffer> parse_plan_file(std::string_view, std::string_view) { return {}; }
std::vector<DeclaredBuffer> declared_from_environment() { return {}; }
std::string_view to_string(FallbackCause) { return "placeholder"; }
Decision decide(const AllReduceCall&, std::span<const DeclaredBuffer>) {
  return {false, FallbackCause::undeclared_count};
}
void DispatchCounters::hit(std::size_t bytes) { ++by_bytes_[bytes].hits; }
void DispatchCounters::fallback(std::size_t bytes, FallbackCause cause) {
  ++by_bytes_[bytes].fallbacks[static_cast<std::size_t>(cause)];
}
std::string DispatchCounters::summary() const { return "placeholder"; }
int nccl_result_for(const std::exception& error) noexcept {
  if (dynamic_cast<const Timeout*>(&error)) return 6;
  if (dynamic_cast<const InvalidArgument*>(&error)) return 4;
  return 3;
}

}  // namespace peerplan::nccl_interposer
