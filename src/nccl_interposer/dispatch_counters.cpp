// SPDX-License-Identifier: Apache-2.0
#include <span>
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

// " (cause n, ...)" of the causes counted in `counts` that ran nowhere, or
// that did not (`failed`), with their total; empty when none did.
struct Causes {
  std::size_t total = 0;
  std::string text;
};
Causes causes(std::span<const std::size_t> counts, bool failed) {
  Causes found;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const auto cause = static_cast<FallbackCause>(i);
    if (counts[i] == 0 || ran_nowhere(cause) != failed) continue;
    found.total += counts[i];
    found.text += (found.text.empty() ? "" : ", ") + std::string(to_string(cause)) + " " +
                  std::to_string(counts[i]);
  }
  if (!found.text.empty()) found.text = " (" + found.text + ")";
  return found;
}

// ", N failed" when N is not 0: calls that returned an error and that
// neither peerplan nor NCCL ran.
std::string failed_part(std::size_t failed, const std::string& why = {}) {
  return failed == 0 ? "" : ", " + std::to_string(failed) + " failed" + why;
}

}  // namespace

// One header line with the totals, then one line per size, smallest first:
//   "1048576 bytes: 100 to peerplan, 3 to NCCL (group_of_many 1, misaligned 2)"
//   "4096 bytes: 1 to peerplan, 0 to NCCL, 3 failed (peerplan_error 1, after_timeout 2)"
std::string DispatchCounters::summary() const {
  std::size_t hits = 0, fallbacks = 0, failures = 0;
  std::string lines;
  for (const auto& [bytes, counts] : by_bytes_) {
    const Causes to_nccl = causes(counts.fallbacks, false);
    const Causes failed = causes(counts.fallbacks, true);
    lines += "\n  " + std::to_string(bytes) + " bytes: " + std::to_string(counts.hits) +
             " to peerplan, " + std::to_string(to_nccl.total) + " to NCCL" + to_nccl.text +
             failed_part(failed.total, failed.text);
    hits += counts.hits;
    fallbacks += to_nccl.total;
    failures += failed.total;
  }
  if (by_bytes_.empty()) return "all-reduce calls: none";
  return "all-reduce calls: " + std::to_string(hits) + " to peerplan, " +
         std::to_string(fallbacks) + " to NCCL" + failed_part(failures) + ", over " +
         std::to_string(by_bytes_.size()) + (by_bytes_.size() == 1 ? " size" : " sizes") + lines;
}

}  // namespace peerplan::nccl_interposer
