// SPDX-License-Identifier: Apache-2.0
#include <string>

#include "nccl_interposer/dispatch_rules.hpp"

namespace peerplan::nccl_interposer {

void DispatchCounters::hit(std::size_t bytes, std::size_t calls) { by_bytes_[bytes].hits += calls; }

void DispatchCounters::fallback(std::size_t bytes, FallbackCause cause, std::size_t calls) {
  // count_ is no cause; counting it would index past the array.
  if (cause >= FallbackCause::count_) cause = FallbackCause::peerplan_error;
  by_bytes_[bytes].fallbacks[static_cast<std::size_t>(cause)] += calls;
}

namespace {

// ", N failed in peerplan" when N is not 0: calls peerplan took and failed,
// which NCCL did not run either.
std::string failed_part(std::size_t failed) {
  return failed == 0 ? "" : ", " + std::to_string(failed) + " failed in peerplan";
}

}  // namespace

// One header line with the totals, then one line per size, smallest first:
//   "1048576 bytes: 100 to peerplan, 3 to NCCL (group_of_many 1, misaligned 2)"
std::string DispatchCounters::summary() const {
  constexpr auto kFailed = static_cast<std::size_t>(FallbackCause::peerplan_error);
  std::size_t hits = 0, fallbacks = 0, failures = 0;
  std::string lines;
  for (const auto& [bytes, counts] : by_bytes_) {
    std::size_t to_nccl = 0;
    std::string causes;
    for (std::size_t i = 0; i < counts.fallbacks.size(); ++i) {
      if (counts.fallbacks[i] == 0 || i == kFailed) continue;
      to_nccl += counts.fallbacks[i];
      causes += (causes.empty() ? "" : ", ") +
                std::string(to_string(static_cast<FallbackCause>(i))) + " " +
                std::to_string(counts.fallbacks[i]);
    }
    lines += "\n  " + std::to_string(bytes) + " bytes: " + std::to_string(counts.hits) +
             " to peerplan, " + std::to_string(to_nccl) + " to NCCL";
    if (!causes.empty()) lines += " (" + causes + ")";
    lines += failed_part(counts.fallbacks[kFailed]);
    hits += counts.hits;
    fallbacks += to_nccl;
    failures += counts.fallbacks[kFailed];
  }
  if (by_bytes_.empty()) return "all-reduce calls: none";
  return "all-reduce calls: " + std::to_string(hits) + " to peerplan, " +
         std::to_string(fallbacks) + " to NCCL" + failed_part(failures) + ", over " +
         std::to_string(by_bytes_.size()) + (by_bytes_.size() == 1 ? " size" : " sizes") + lines;
}

}  // namespace peerplan::nccl_interposer
