// SPDX-License-Identifier: Apache-2.0
#include "nccl_interposer/roll_call.hpp"

#include <cstddef>
#include <vector>

namespace peerplan::nccl_interposer {
namespace {

// "rank 3" or "ranks 0, 2 and 5".
std::string rank_list(const std::vector<std::size_t>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

}  // namespace

RollCallVerdict judge_roll_call(std::span<const std::uint8_t> answers) {
  std::vector<std::size_t> nothing;
  std::vector<std::size_t> unparsable;
  std::vector<std::size_t> unknown;
  for (std::size_t rank = 0; rank < answers.size(); ++rank) {
    switch (static_cast<RollCallAnswer>(answers[rank])) {
      case RollCallAnswer::declared:
        break;
      case RollCallAnswer::nothing_declared:
        nothing.push_back(rank);
        break;
      case RollCallAnswer::unparsable:
        unparsable.push_back(rank);
        break;
      default:
        unknown.push_back(rank);
        break;
    }
  }
  RollCallVerdict verdict;
  if (answers.empty()) {
    verdict.reason = "the roll call before peerplan's create saw no rank";
    verdict.warn = true;
    return verdict;
  }
  if (nothing.empty() && unparsable.empty() && unknown.empty()) {
    verdict.create = true;
    return verdict;
  }
  if (nothing.size() == answers.size()) {
    verdict.reason =
        "nothing is declared (PEERPLAN_NCCL_DECLARE and PEERPLAN_PLAN_FILE unset, or no size "
        "they declare is one peerplan can declare)";
    return verdict;
  }
  verdict.warn = true;
  std::string why;
  const auto add = [&why](const std::string& part) { why += (why.empty() ? "" : "; ") + part; };
  if (!nothing.empty()) {
    add(rank_list(nothing) + " of " + std::to_string(answers.size()) +
        " declared nothing: set PEERPLAN_NCCL_DECLARE (or PEERPLAN_PLAN_FILE) to the same "
        "value on every rank (mpirun -x PEERPLAN_NCCL_DECLARE=..., or export it before torchrun)");
  }
  if (!unparsable.empty()) {
    add(rank_list(unparsable) + " could not read their declarations (their WARN says why)");
  }
  if (!unknown.empty()) {
    add(rank_list(unknown) +
        " answered the roll call with an unknown value (a different "
        "libpeerplan_nccl.so on every rank?)");
  }
  verdict.reason = "not every rank declares sizes, so no rank uses peerplan: " + why;
  return verdict;
}

}  // namespace peerplan::nccl_interposer
