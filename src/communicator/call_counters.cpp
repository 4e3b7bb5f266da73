// SPDX-License-Identifier: Apache-2.0
#include "communicator/call_counters.hpp"

namespace peerplan::communicator {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

}  // namespace

namespace {

bool has_elements(const PlanKey& key) noexcept {
  for (int d = 0; d < key.rank; ++d) {
    if (key.shape[static_cast<std::size_t>(d)] == 0) return false;
  }
  return true;
}

}  // namespace

CallCounters::CallCounters(std::size_t undeclared_keys_tracked) {
  if (undeclared_keys_tracked > 0)
    undeclared_keys_ = std::make_unique<UndeclaredKeys>(undeclared_keys_tracked);
}

void CallCounters::count(PreparedPlan* plan, const CallResult& result, const PlanKey& key) {
  if (result.route != Route::fallback) {
    plan->hits.fetch_add(1, kRelaxed);
    p2p_calls_.fetch_add(1, kRelaxed);
    if (result.zero_copy) zero_copy_calls_.fetch_add(1, kRelaxed);
    return;
  }
  if (plan) plan->fallbacks.fetch_add(1, kRelaxed);
  // A call with no elements is counted, not listed: no such shape can be
  // declared, and the table's heading says to declare what it lists.
  if (!plan && undeclared_keys_ && has_elements(key)) undeclared_keys_->record(key);
  switch (result.reason) {
    case FallbackReason::over_cutoff:
      fallback_over_cutoff_.fetch_add(1, kRelaxed);
      break;
    case FallbackReason::p2p_disabled:
      fallback_p2p_disabled_.fetch_add(1, kRelaxed);
      break;
    case FallbackReason::node_layout:
      fallback_node_layout_.fetch_add(1, kRelaxed);
      break;
    default:
      fallback_undeclared_.fetch_add(1, kRelaxed);
      break;
  }
}

Stats CallCounters::snapshot(std::span<const Declaration> declared,
                             std::span<PreparedPlan* const> plans) const {
  Stats s;
  for (std::size_t i = 0; i < plans.size() && i < declared.size(); ++i) {
    const PreparedPlan& p = *plans[i];
    s.plans.push_back(PlanStats{declared[i].name, declared[i].operation, p.route, p.reason,
                                p.hits.load(kRelaxed), p.fallbacks.load(kRelaxed), p.protocol,
                                p.launch_text});
  }
  s.p2p_calls = p2p_calls_.load(kRelaxed);
  s.zero_copy_calls = zero_copy_calls_.load(kRelaxed);
  s.fallback_undeclared = fallback_undeclared_.load(kRelaxed);
  s.fallback_over_cutoff = fallback_over_cutoff_.load(kRelaxed);
  s.fallback_p2p_disabled = fallback_p2p_disabled_.load(kRelaxed);
  s.fallback_node_layout = fallback_node_layout_.load(kRelaxed);
  if (undeclared_keys_) s.undeclared = undeclared_keys_->snapshot();
  return s;
}

void CallCounters::reset(std::span<PreparedPlan* const> plans) {
  for (PreparedPlan* p : plans) {
    p->hits.store(0, kRelaxed);
    p->fallbacks.store(0, kRelaxed);
  }
  for (auto* counter : {&p2p_calls_, &zero_copy_calls_, &fallback_undeclared_,
                        &fallback_over_cutoff_, &fallback_p2p_disabled_, &fallback_node_layout_})
    counter->store(0, kRelaxed);
  if (undeclared_keys_) undeclared_keys_->reset();
}

void zero_counts(Stats& s) noexcept {
  for (auto& p : s.plans) p.hits = p.fallbacks = 0;
  s.p2p_calls = s.zero_copy_calls = 0;
  s.fallback_undeclared = s.fallback_over_cutoff = s.fallback_p2p_disabled = 0;
  s.fallback_node_layout = 0;
  s.undeclared.clear();
}

}  // namespace peerplan::communicator
