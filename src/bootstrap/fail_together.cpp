// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/fail_together.hpp"

#include <cstring>
#include <utility>

namespace peerplan::bootstrap {
namespace {

// Blob of a verdict: empty for success, else a marker byte and the message
// (the marker keeps an empty error message distinct from success).
constexpr std::byte kFailed{0x21};

Blob encode(const std::optional<std::string>& error) {
  if (!error) return {};
  Blob blob(1 + error->size());
  blob[0] = kFailed;
  if (!error->empty()) std::memcpy(blob.data() + 1, error->data(), error->size());
  return blob;
}

}  // namespace

std::string describe_ranks(const std::vector<int>& ranks) {
  // Runs of three or more consecutive ranks read as ranges ("ranks 0-7"):
  // an error every rank of a large job hit would otherwise list them all.
  // Two in a row stay a pair ("ranks 2, 3"), which is no longer as a range.
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t end = i + 1;  // one past the run starting at i
    while (end < ranks.size() && ranks[end] == ranks[end - 1] + 1) ++end;
    if (i > 0) text += ", ";
    if (end - i >= 3) {
      text += std::to_string(ranks[i]) + '-' + std::to_string(ranks[end - 1]);
      i = end;
    } else {
      text += std::to_string(ranks[i]);
      ++i;
    }
  }
  return text;
}

void add_rank(RanksByText& groups, std::string text, int rank) {
  auto group = groups.begin();
  while (group != groups.end() && group->first != text) ++group;
  if (group == groups.end()) {
    groups.emplace_back(std::move(text), std::vector<int>{rank});
  } else {
    group->second.push_back(rank);
  }
}

std::optional<Failures> gather_failures(Bootstrap& bootstrap,
                                        const std::optional<std::string>& local_error) {
  const std::vector<Blob> all = bootstrap.allgather(encode(local_error));
  Failures failures;
  RanksByText groups;
  for (int rank = 0; rank < static_cast<int>(all.size()); ++rank) {
    const Blob& blob = all[rank];
    if (blob.empty()) continue;
    failures.ranks.push_back(rank);
    std::string message(reinterpret_cast<const char*>(blob.data()) + 1, blob.size() - 1);
    if (message.empty()) message = "failed (no message)";
    add_rank(groups, std::move(message), rank);
  }
  if (failures.ranks.empty()) return std::nullopt;
  for (const auto& [message, ranks] : groups) {
    if (!failures.message.empty()) failures.message += "; ";
    failures.message += describe_ranks(ranks) + ": " + message;
  }
  return failures;
}

}  // namespace peerplan::bootstrap
