// SPDX-License-Identifier: Apache-2.0
#include "transport/host/split_verdict.hpp"

#include "bootstrap/fail_together.hpp"

namespace peerplan::transport::host {

std::string describe_split_verdict(const bootstrap::detail::TimedExchange::Said& said,
                                   std::chrono::milliseconds timeout, const char* late_word) {
  std::string text = "this rank was stalled while it sent its word to the other ranks, past its " +
                     std::to_string(timeout.count()) +
                     " ms timeout, so they did not all get the same word and may not all get "
                     "the same outcome:";
  std::string parts;
  const auto add = [&](const std::string& part) { parts += (parts.empty() ? " " : "; ") + part; };
  if (!said.in_time.empty()) {
    add(bootstrap::describe_ranks(said.in_time) +
        " got its 'ok' in time: the call completes there if every other rank said 'ok' too");
  }
  if (said.unsure >= 0) {
    add(bootstrap::describe_ranks({said.unsure}) +
        " got its 'ok' at a moment this rank cannot tell: the call may complete there");
  }
  if (!said.late.empty())
    add(bootstrap::describe_ranks(said.late) + " got '" + late_word + "': the call fails there");
  return text + parts + "; this rank fails it";
}

}  // namespace peerplan::transport::host
