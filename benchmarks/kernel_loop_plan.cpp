// SPDX-License-Identifier: Apache-2.0
#include "kernel_loop_plan.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <stdexcept>

namespace peerplan::bench::loop {
namespace {

std::vector<std::string_view> split_commas(std::string_view text) {
  std::vector<std::string_view> parts;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    parts.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return parts;
}

std::string known_case_names() {
  std::string names;
  for (const auto& c : all_cases()) names += (names.empty() ? "" : ", ") + std::string(c.name);
  return names;
}

// A whole positive number without sign or suffix; -1 when it is none.
std::int64_t whole_number(std::string_view digits) {
  if (digits.empty() || digits.size() > 15) return -1;
  std::int64_t value = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace

bool waits_on_flags_only(LoopCase c) noexcept {
  switch (c) {
    case LoopCase::two_shot:
    case LoopCase::fused_staged:
    case LoopCase::fused_two_shot_row_norm:
    case LoopCase::fused_two_shot_rows:
      return true;
    default:
      return false;
  }
}

const std::vector<LoopCaseInfo>& all_cases() {
  static const std::vector<LoopCaseInfo> cases = {
      {LoopCase::one_shot_ll, "one_shot_ll", false},
      {LoopCase::one_shot_lamport, "one_shot_lamport", false},
      {LoopCase::two_shot, "two_shot", false},
      {LoopCase::two_shot_lamport, "two_shot_lamport", false},
      {LoopCase::two_shot_dma, "two_shot_dma", false},
      {LoopCase::pull_one_shot, "pull_one_shot", false},
      {LoopCase::pull_two_shot, "pull_two_shot", false},
      {LoopCase::pull_one_shot_staged, "pull_one_shot_staged", false},
      {LoopCase::pull_two_shot_staged, "pull_two_shot_staged", false},
      {LoopCase::fused_ll, "fused_ll", true},
      {LoopCase::fused_lamport, "fused_lamport", true},
      {LoopCase::fused_staged, "fused_staged", true},
      {LoopCase::fused_two_shot_row_norm, "fused_two_shot_row_norm", true},
      {LoopCase::fused_two_shot_rows, "fused_two_shot_rows", true},
  };
  return cases;
}

std::vector<LoopCaseInfo> parse_cases(std::string_view text) {
  if (text == "all") return all_cases();
  std::vector<LoopCaseInfo> chosen;
  for (std::string_view name : split_commas(text)) {
    const auto& cases = all_cases();
    const auto found = std::find_if(cases.begin(), cases.end(),
                                    [&](const LoopCaseInfo& c) { return c.name == name; });
    if (found == cases.end()) {
      throw std::invalid_argument(
          "--cases: unknown case '" + std::string(name) +
          "'; give 'all' or a comma-separated list of: " + known_case_names());
    }
    const bool repeated = std::any_of(chosen.begin(), chosen.end(),
                                      [&](const LoopCaseInfo& c) { return c.id == found->id; });
    if (!repeated) chosen.push_back(*found);
  }
  return chosen;
}

std::vector<std::int64_t> parse_sizes(std::string_view text) {
  std::vector<std::int64_t> sizes;
  for (std::string_view part : split_commas(text)) {
    std::int64_t scale = 1;
    std::string_view digits = part;
    if (!part.empty()) {
      switch (std::toupper(static_cast<unsigned char>(part.back()))) {
        case 'K':
          scale = std::int64_t{1} << 10;
          break;
        case 'M':
          scale = std::int64_t{1} << 20;
          break;
        case 'G':
          scale = std::int64_t{1} << 30;
          break;
        default:
          break;
      }
      if (scale != 1) digits.remove_suffix(1);
    }
    const std::int64_t value = whole_number(digits);
    if (value <= 0) {
      throw std::invalid_argument("--sizes: '" + std::string(part) +
                                  "' is not a positive whole number with an optional K, M or G "
                                  "suffix (e.g. 1K,64K,16M; rows for the fused cases)");
    }
    sizes.push_back(value * scale);
  }
  return sizes;
}

std::vector<int> parse_rank_counts(std::string_view text) {
  std::vector<int> counts;
  for (std::string_view part : split_commas(text)) {
    const std::int64_t value = whole_number(part);
    if (value < 2 || value > 8) {
      throw std::invalid_argument("--ranks: '" + std::string(part) +
                                  "' is not a virtual rank count from 2 to 8 (e.g. 2,4,8)");
    }
    counts.push_back(static_cast<int>(value));
  }
  return counts;
}

std::vector<std::int64_t> geometric_sizes(std::int64_t first, std::int64_t last,
                                          std::int64_t factor) {
  if (first < 1 || factor < 2) {
    throw std::invalid_argument("geometric_sizes: first must be >= 1 and factor >= 2");
  }
  std::vector<std::int64_t> sizes;
  for (std::int64_t s = first; s <= last; s *= factor) {
    sizes.push_back(s);
    if (s > std::numeric_limits<std::int64_t>::max() / factor) break;
  }
  return sizes;
}

int resident_units_per_rank(int device_units, int ranks, int in_flight) {
  if (ranks < 1 || in_flight < 1) {
    throw std::invalid_argument("resident_units_per_rank: ranks and in_flight must be >= 1");
  }
  if (device_units <= 0) return 0;
  return device_units / (ranks * in_flight);
}

unsigned capped_blocks(unsigned blocks, int units_cap, unsigned cluster) {
  const unsigned unit = std::max(cluster, 1u);
  const unsigned cap = static_cast<unsigned>(std::max(units_cap, 1)) * unit;
  const unsigned capped = std::min(blocks, cap);
  // A clustered grid stays a whole number of clusters.
  return std::max(capped / unit * unit, unit);
}

}  // namespace peerplan::bench::loop
