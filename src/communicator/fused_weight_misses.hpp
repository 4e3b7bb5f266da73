// SPDX-License-Identifier: Apache-2.0
// Declared fused plans found by their key without the weight address. A
// fused call that misses its plan only by the weight (a weight reallocated
// after declare(), or another rank's tensor) takes the fallback on this
// rank, while ranks that pass the declared weight take the P2P plan and wait
// for this one until they time out; their Timeout cannot say why, so this
// rank says it, in a WARN, once per plan.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "peerplan/declaration.hpp"
#include "peerplan/plan_key.hpp"

namespace peerplan::communicator {

class FusedWeightMisses {
 public:
  // `p2p[i]`: declaration i runs on a P2P route (a plan every rank sends
  // to the fallback anyway needs no warning).
  void rebuild(std::span<const Declaration> declarations, const std::vector<bool>& p2p);
  void clear();
  // For a fused call whose key missed the index: the warning, the first
  // time declared P2P plans differ from `key` in their weights alone (once
  // per such key: every layer's norm may share it).
  std::optional<std::string> warning_for_miss(const PlanKey& key);

 private:
  struct Declared {
    std::string name;  // the first declared plan of the key
    std::uintptr_t weight;
    int plans = 1;  // declared P2P plans with this key but for the weight (one per layer)
    bool warned = false;
  };
  std::unordered_map<PlanKey, std::size_t, PlanKeyHash> by_key_without_weight_;
  std::vector<Declared> declared_;
};

}  // namespace peerplan::communicator
