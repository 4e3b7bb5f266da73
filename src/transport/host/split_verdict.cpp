// SPDX-License-Identifier: Apache-2.0
#include "transport/host/split_verdict.hpp"

#include <vector>

namespace peerplan::transport::host {
namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

}  // namespace

std::string describe_split_verdict(const bootstrap::detail::TimedExchange::Said& said,
                                   std::chrono::milliseconds timeout, const char* late_word) {
  std::string text = "this rank was stalled while it sent its word to the other ranks, past its " +
                     std::to_string(timeout.count()) +
                     " ms timeout, so they did not all get the same word and may not all get "
                     "the same outcome:";
  std::string parts;
  const auto add = [&](const std::string& part) { parts += (parts.empty() ? " " : "; ") + part; };
  if (!said.in_time.empty()) {
    add(rank_list(said.in_time) +
        " got its 'ok' in time: the call completes there if every other rank said 'ok' too");
  }
  if (said.unsure >= 0) {
    add(rank_list({said.unsure}) +
        " got its 'ok' at a moment this rank cannot tell: the call may complete there");
  }
  if (!said.late.empty())
    add(rank_list(said.late) + " got '" + late_word + "': the call fails there");
  return text + parts + "; this rank fails it";
}

}  // namespace peerplan::transport::host
