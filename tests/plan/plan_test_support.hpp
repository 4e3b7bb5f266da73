// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the plan-layer tests.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "peerplan/declaration.hpp"
#include "peerplan/layout.hpp"
#include "plan/plan_entry.hpp"

namespace peerplan::plan::test {

// A payload that counts its destructions, to prove replaced plans release
// their resources exactly when the contract says.
class CountingPayload : public PlanPayload {
 public:
  CountingPayload(std::atomic<int>& destroyed, int tag) : destroyed_(destroyed), tag_(tag) {}
  ~CountingPayload() override { destroyed_.fetch_add(1, std::memory_order_relaxed); }
  int tag() const noexcept { return tag_; }

 private:
  std::atomic<int>& destroyed_;
  int tag_;
};

inline std::vector<std::unique_ptr<PlanPayload>> counting_payloads(std::size_t count,
                                                                   std::atomic<int>& destroyed,
                                                                   int first_tag = 0) {
  std::vector<std::unique_ptr<PlanPayload>> payloads;
  for (std::size_t i = 0; i < count; ++i) {
    payloads.push_back(
        std::make_unique<CountingPayload>(destroyed, first_tag + static_cast<int>(i)));
  }
  return payloads;
}

inline TensorLayout strided(std::vector<std::int64_t> shape, std::vector<std::int64_t> strides) {
  return TensorLayout::strided(shape, strides);
}

// A transformer-like declared set: per layer an all-reduce and a fused
// add+RMSNorm of [tokens, hidden] for each token count, one weight per layer.
struct TransformerSet {
  std::vector<std::uint16_t> weights;
  std::vector<Declaration> declarations;
  std::int64_t hidden = 0;

  TransformerSet(int layers, std::vector<std::int64_t> token_counts, std::int64_t hidden_size,
                 float eps = 1e-6f)
      : weights(static_cast<std::size_t>(layers * hidden_size)), hidden(hidden_size) {
    for (int layer = 0; layer < layers; ++layer) {
      const void* weight = weight_of(layer);
      for (std::int64_t tokens : token_counts) {
        const TensorLayout layout{tokens, hidden_size};
        const std::string suffix = std::to_string(layer) + ".t" + std::to_string(tokens);
        declarations.push_back(Declaration::all_reduce("ar.l" + suffix, DataType::bf16, layout));
        declarations.push_back(Declaration::fused_add_rms_norm("norm.l" + suffix, DataType::bf16,
                                                               layout, weight, eps));
      }
    }
  }
  const void* weight_of(int layer) const {
    return weights.data() + static_cast<std::size_t>(layer) * static_cast<std::size_t>(hidden);
  }
};

}  // namespace peerplan::plan::test
