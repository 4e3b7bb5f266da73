// SPDX-License-Identifier: Apache-2.0
// A peerplan Communicator that does nothing, for putting in the NCCL
// interposer's side table without a GPU: every key has a one-shot plan,
// every call returns at once. The dispatch tests and the interposer's cost
// benchmark derive from it and override what they watch.
#pragma once

#include <span>
#include <string>

#include "peerplan/communicator.hpp"

namespace peerplan::nccl_interposer {

class StandInCommunicator : public Communicator {
 public:
  CallResult all_reduce(const void*, void*, DataType, const TensorLayout&, StreamHandle) override {
    return {Route::one_shot, FallbackReason::none};
  }
  void declare(std::span<const Declaration>) override {}
  bool has_plan_for(const PlanKey&) const noexcept override { return true; }
  PlanInfo plan_for(const PlanKey&) const override {
    PlanInfo plan;
    plan.route = Route::one_shot;
    return plan;
  }
  CallResult fused_add_rms_norm(void*, void*, const void*, float, DataType, const TensorLayout&,
                                StreamHandle) override {
    return {};
  }
  void register_buffers(std::span<const BufferRegion>) override {}
  void deregister_buffers() override {}
  std::size_t registered_buffer_count() const noexcept override { return 0; }
  Stats stats() const override { return {}; }
  void reset_stats() override {}
  void close() override {}
  bool is_closed() const noexcept override { return false; }
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 2; }
  Backend backend() const noexcept override { return Backend::cuda; }
  int cuda_device() const noexcept override { return 0; }
  Fallback fallback() const noexcept override { return Fallback::nccl; }
  bool p2p_enabled() const noexcept override { return true; }
  const std::string& p2p_disabled_reason() const noexcept override { return empty_; }
  const Config& config() const noexcept override { return config_; }
  const std::string& topology_fingerprint() const noexcept override { return empty_; }
  RouteCutoffs cutoffs() const noexcept override { return {}; }

 private:
  std::string empty_;
  Config config_;
};

}  // namespace peerplan::nccl_interposer
