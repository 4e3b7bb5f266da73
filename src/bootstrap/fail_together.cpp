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

std::optional<Failures> collect_failures(const std::vector<std::optional<std::string>>& by_rank) {
  Failures failures;
  RanksByText groups;
  for (int rank = 0; rank < static_cast<int>(by_rank.size()); ++rank) {
    if (!by_rank[rank]) continue;
    failures.ranks.push_back(rank);
    add_rank(groups, by_rank[rank]->empty() ? "failed (no message)" : *by_rank[rank], rank);
  }
  if (failures.ranks.empty()) return std::nullopt;
  for (const auto& [message, ranks] : groups) {
    if (!failures.message.empty()) failures.message += "; ";
    failures.message += describe_ranks(ranks) + ": " + message;
  }
  return failures;
}

std::optional<Failures> gather_failures(Bootstrap& bootstrap,
                                        const std::optional<std::string>& local_error) {
  std::vector<std::optional<std::string>> by_rank;
  for (const Blob& blob : bootstrap.allgather(encode(local_error))) {
    if (blob.empty()) {
      by_rank.emplace_back();
    } else {
      by_rank.emplace_back(
          std::string(reinterpret_cast<const char*>(blob.data()) + 1, blob.size() - 1));
    }
  }
  return collect_failures(by_rank);
}

}  // namespace peerplan::bootstrap
