// SPDX-License-Identifier: Apache-2.0
#include "core/unknown_variables.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>

#include "core/environment.hpp"
#include "core/log.hpp"

extern char** environ;  // POSIX

namespace peerplan::core {
namespace {

constexpr std::string_view kPrefix = "PEERPLAN_";

// Read outside apply_environment: by the bootstrap, the fault-injection
// hooks, the Python package, the scripts and the test harness (set for the
// programs they start, so they reach the library's environment too).
constexpr std::string_view kOtherKnownNames[] = {
    "PEERPLAN_HOST_ID",
    "PEERPLAN_FAULT_INJECT",
    "PEERPLAN_TEST_EPOCH_START",
    "PEERPLAN_LIBRARY",
    "PEERPLAN_NCCL_LIBRARY",
    "PEERPLAN_CMAKE_ARGS",
    "PEERPLAN_CTEST_ARGS",
    "PEERPLAN_BUILD_DIR",
    "PEERPLAN_DEMO_BUILD_DIR",
    "PEERPLAN_DEMO_RANKS",
    "PEERPLAN_GPU_COUNT",
    "PEERPLAN_SKIP_NCCL_LESS",
    "PEERPLAN_NCCL_LESS_BUILD_DIR",
    "PEERPLAN_NCCL_LESS_ALL_RANKS",
    "PEERPLAN_NCCL_LESS_CTEST_ARGS",
    "PEERPLAN_SKIP_SANITIZERS",
    "PEERPLAN_SANITIZER_BUILD_DIR",
    "PEERPLAN_SANITIZER_CTEST_ARGS",
    "PEERPLAN_MPI_SELFTEST_BREAK",
    "PEERPLAN_MPI_TEST_SYNC_TIMEOUT_S",
    "PEERPLAN_TEST_FIXTURES",
    "PEERPLAN_SOAK_CYCLES",
    "PEERPLAN_TUNE_TEST_FILE",
    "PEERPLAN_TEST_SEED",
    "PEERPLAN_BUILD",
    // The NCCL interposer's (docs/nccl-interposer.md), not Config fields.
    "PEERPLAN_NCCL_DECLARE",
    "PEERPLAN_PLAN_FILE",
};

std::vector<std::string_view> known_names() {
  std::vector<std::string_view> names = environment_variable_names();
  const auto retired = retired_environment_variable_names();
  names.insert(names.end(), retired.begin(), retired.end());
  names.insert(names.end(), std::begin(kOtherKnownNames), std::end(kOtherKnownNames));
  return names;
}

// Edits (insert, delete, replace, swap two neighbours) from a to b.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// A name this close to a known one is taken for a misspelling of it.
constexpr std::size_t kMaxSuggestionEdits = 3;

std::string closest_known(std::string_view name, const std::vector<std::string_view>& known) {
  std::string_view best;
  std::size_t best_edits = kMaxSuggestionEdits + 1;
  for (std::string_view candidate : known) {
    const std::size_t edits = edit_distance(name, candidate);
    if (edits < best_edits) {
      best = candidate;
      best_edits = edits;
    }
  }
  return std::string(best);
}

}  // namespace

std::vector<UnknownVariable> unknown_variables(std::span<const std::string_view> environment) {
  const auto known = known_names();
  std::vector<UnknownVariable> unknown;
  for (std::string_view entry : environment) {
    const std::string_view name = entry.substr(0, entry.find('='));
    if (!name.starts_with(kPrefix)) continue;
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    unknown.push_back({std::string(name), closest_known(name, known)});
  }
  return unknown;
}

std::string describe(const UnknownVariable& unknown) {
  std::string text = "unknown variable " + unknown.name;
  if (!unknown.suggestion.empty()) text += " (did you mean " + unknown.suggestion + "?)";
  return text;
}

void warn_unknown_variables_once() {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  std::vector<std::string_view> environment;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry)
    environment.emplace_back(*entry);
  const auto unknown = unknown_variables(environment);
  if (unknown.empty()) return;
  std::string message;
  for (const auto& variable : unknown)
    message += (message.empty() ? "" : "; ") + describe(variable);
  log::warn("environment: " + message +
            ": peerplan ignores it (docs/configuration.md lists every variable)");
}

}  // namespace peerplan::core
