// SPDX-License-Identifier: Apache-2.0
// The counters behind Communicator::stats(): calls per route and per
// fallback reason, the per-plan hits and fallbacks (which live in each
// PreparedPlan, so a lookup that found the plan counts it without a second
// search), and, when asked, the most frequent undeclared keys. Every counter
// is a relaxed atomic: stats() may run on another thread than the calls.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "communicator/prepared_plan.hpp"
#include "communicator/undeclared_keys.hpp"
#include "peerplan/declaration.hpp"
#include "peerplan/plan_key.hpp"
#include "peerplan/route.hpp"

namespace peerplan::communicator {

class CallCounters {
 public:
  // `undeclared_keys_tracked` > 0 keeps that many undeclared keys
  // (Config::undeclared_keys_tracked); 0 keeps none.
  explicit CallCounters(std::size_t undeclared_keys_tracked);

  // One call: `plan` is the declared plan it hit (null: undeclared, and
  // then `key` is recorded when keys are tracked).
  void count(PreparedPlan* plan, const CallResult& result, const PlanKey& key);

  // The counts now, with one PlanStats per declared plan (`declared[i]`
  // paired with `plans[i]`).
  Stats snapshot(std::span<const Declaration> declared, std::span<PreparedPlan* const> plans) const;
  // Zeroes every counter, the plans' too.
  void reset(std::span<PreparedPlan* const> plans);

 private:
  std::atomic<std::uint64_t> p2p_calls_{0};
  std::atomic<std::uint64_t> zero_copy_calls_{0};
  std::atomic<std::uint64_t> fallback_undeclared_{0};
  std::atomic<std::uint64_t> fallback_over_cutoff_{0};
  std::atomic<std::uint64_t> fallback_p2p_disabled_{0};
  std::atomic<std::uint64_t> fallback_node_layout_{0};
  std::unique_ptr<UndeclaredKeys> undeclared_keys_;  // tracking on only
};

// Every count in `stats` set to 0, the rest (plans, routes) kept: what
// reset_stats() does to the counts a closed communicator kept.
void zero_counts(Stats& stats) noexcept;

}  // namespace peerplan::communicator
