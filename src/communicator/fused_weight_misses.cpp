// SPDX-License-Identifier: Apache-2.0
#include "communicator/fused_weight_misses.hpp"

#include "plan/norm_text.hpp"

namespace peerplan::communicator {

void FusedWeightMisses::rebuild(std::span<const Declaration> declarations,
                                const std::vector<bool>& p2p) {
  clear();
  for (std::size_t i = 0; i < declarations.size(); ++i) {
    const Declaration& d = declarations[i];
    if (d.operation != Operation::fused_add_rms_norm || i >= p2p.size() || !p2p[i]) continue;
    PlanKey key = make_key(d);
    const std::uintptr_t weight = key.weight;
    key.weight = 0;
    const auto [found, added] = by_key_without_weight_.emplace(key, declared_.size());
    if (added)
      declared_.push_back({d.name, weight});
    else
      ++declared_[found->second].plans;
  }
}

void FusedWeightMisses::clear() {
  by_key_without_weight_.clear();
  declared_.clear();
}

std::optional<std::string> FusedWeightMisses::warning_for_miss(const PlanKey& key) {
  if (key.operation != Operation::fused_add_rms_norm || by_key_without_weight_.empty()) return {};
  PlanKey without_weight = key;
  without_weight.weight = 0;
  const auto found = by_key_without_weight_.find(without_weight);
  if (found == by_key_without_weight_.end()) return {};
  Declared& declared = declared_[found->second];
  if (declared.warned) return {};
  declared.warned = true;
  const std::string matched =
      declared.plans == 1
          ? "the declared plan \"" + declared.name + "\" but for its weight (declared " +
                plan::weight_address_text(declared.weight) + ", passed " +
                plan::weight_address_text(key.weight) + ")"
          : "the dtype, shape and eps of " + std::to_string(declared.plans) +
                " declared plans (the first \"" + declared.name + "\") but none of their " +
                "weights (passed " + plan::weight_address_text(key.weight) + ")";
  return "fused_add_rms_norm: a call matches " + matched +
         ", so it takes the fallback on this rank; ranks that pass a declared weight take the "
         "P2P route and wait for this one until they raise Timeout. Pass the declared weight, "
         "or declare() again after reallocating it (said once per shape)";
}

}  // namespace peerplan::communicator
